//! Tests of the parser.

use super::*;
use quote::quote;

fn parse(tokens: TokenStream) -> syn::Result<Pipeline> {
    syn::parse2(tokens)
}

fn names(p: &Pipeline) -> Vec<String> {
    p.main.calls.iter().map(|c| c.name.to_string()).collect()
}

#[test]
fn environment_forms() {
    let p = parse(quote!(self.env.from_elements([1]).collect_vec())).unwrap();
    assert_eq!(p.main.head_tokens().to_string(), "self . env");
    assert_eq!(names(&p), ["from_elements", "collect_vec"]);
    let p = parse(quote!(MemoryEnv::new().from_collection(0..n).print())).unwrap();
    assert_eq!(p.main.head_tokens().to_string(), "MemoryEnv :: new ()");
    let p = parse(quote!((envs[0].clone()).from_elements([1]).print())).unwrap();
    assert_eq!(p.main.head_tokens().to_string(), "(envs [0] . clone ())");
    let p = parse(quote!(make_env().from_elements([1]).print())).unwrap();
    assert_eq!(p.main.head_tokens().to_string(), "make_env ()");
}

#[test]
fn arguments_turbofish_and_ranges() {
    let p = parse(quote!(env
        .from_collection(0..10)
        .map::<u8, _>(|x| x as u8, extra)
        .sum()
        .print()))
    .unwrap();
    assert_eq!(names(&p), ["from_collection", "map", "sum", "print"]);
    assert_eq!(
        p.main.calls[1]
            .turbofish
            .as_ref()
            .map(ToString::to_string)
            .as_deref(),
        Some(":: < u8 , _ >")
    );
    assert_eq!(p.main.calls[1].args.len(), 2);
    assert_eq!(p.main.calls[2].args.len(), 0);
}

#[test]
fn state_declarations_parse_only_for_state() {
    let p = parse(quote!(env.from_elements([1]).key_by(k).state(a: ValueState<u8> = 0, b: MapState<u8, String>).process(f).print()))
        .unwrap();
    match &p.main.calls[2].args {
        Args::States(decls) => {
            assert_eq!(decls.len(), 2);
            assert_eq!(decls[0].name.to_string(), "a");
            assert!(decls[0].default.is_some() && decls[1].default.is_none());
        }
        Args::Exprs(_) => panic!("state takes declarations"),
    }
    assert!(parse(quote!(env.from_elements([1]).map(a: u8).print())).is_err());
}

#[test]
fn let_bindings_name_streams_before_the_pipeline() {
    let p = parse(quote! {
        let payments = env.from_elements([1]).map(|x| x);
        let keyed = payments.key_by(|x| *x);
        env.from_elements([2]).key_by(|x| *x).interval_join(keyed).between(0, 1).process(f).print()
    })
    .unwrap();
    let names: Vec<_> = p.bindings.iter().map(|b| b.name.to_string()).collect();
    assert_eq!(names, ["payments", "keyed"]);
    assert_eq!(p.bindings[1].chain.head_tokens().to_string(), "payments");
    let join = &p.main.calls[2];
    let other = join
        .stream
        .as_ref()
        .expect("the stream argument as a chain");
    assert_eq!(
        other.head_name().map(ToString::to_string).as_deref(),
        Some("keyed")
    );
    assert!(other.calls.is_empty());
    assert!(p.bound(other, p.bindings.len()).is_some());
    assert_eq!(
        p.first_call().map(|c| c.name.to_string()).as_deref(),
        Some("from_elements")
    );
    let p = parse(quote! {
        let s = env.from_elements([1]);
        let s = s.map(|x| x);
        s.print()
    })
    .unwrap();
    assert_eq!(
        p.first_call().map(|c| c.name.to_string()).as_deref(),
        Some("from_elements")
    );
}

#[test]
fn let_errors() {
    let err = |tokens| {
        parse(tokens)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert!(
        err(quote!(env.from_elements([1]).print(); env.from_elements([2]).print()))
            .starts_with("expected `let name = stream;`")
    );
    assert!(
        err(quote!(let mut s = env.from_elements([1]); s.print())).starts_with("expected a name")
    );
    assert!(err(quote!(let s: S = env.from_elements([1]); s.print())).contains("without a type"));
    assert!(err(quote!(let s = ; s.print())).starts_with("expected a stream after `=`"));
    assert!(err(quote!(let s = env.from_elements([1]);))
        .starts_with("expected the pipeline after this `let`"));
    assert!(err(quote!(env.from_elements([1]).print();)).starts_with("unexpected `;`"));
}

#[test]
fn a_stream_argument_that_is_not_a_chain_is_an_expression() {
    let p = parse(quote!(env.from_elements([1]).union(streams[0]).print())).unwrap();
    assert!(p.main.calls[1]
        .stream
        .as_ref()
        .is_some_and(|c| c.calls.is_empty()));
    let p = parse(quote!(env.from_elements([1]).union(a.b().c).print())).unwrap();
    assert!(p.main.calls[1].stream.is_none());
}

#[test]
fn syntax_errors() {
    let e = parse(quote!(env.from_elements([1]).len.print()))
        .err()
        .unwrap();
    assert_eq!(
        e.to_string(),
        "expected an operator call `.name(arguments)`"
    );
    assert!(parse(TokenStream::new()).is_err());
}
