//! A small table: what each kind of row generates.
// The toy's items are `pub` as a real table's are, inside a private test module.
#![allow(unreachable_pub)]

use std::time::Duration;

use super::{at_least_one, invalid, key_part};
use crate::Error;

options! {
    /// A toy options struct.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Toy;
    /// Its builder.
    pub struct ToyBuilder;
    /// Builds it.
    fn build = finish;
    /// Reads it.
    impl Deserialize via ToyFile;
    {
        /// A name.
        name: String = "toy".into(), get(str), set(into), check(key_part);
        /// A count.
        count: u32 = 1, get(value), check(at_least_one), note("≥ 1");
        /// A wait.
        wait: Option<Duration> = None, get(value);
        /// A tag, set from a `&str`.
        pub tag: Option<String> = None, set(|t: &str| Some(t.to_owned()));
    }
    group inner:
    /// Options stored together.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct Inner {
        /// A limit.
        pub(crate) limit: u64 = 10, get(value), check(at_least_one);
        /// A period, at most `limit` seconds.
        pub(crate) period: Duration = Duration::from_secs(1), get(value);
    }
}

fn finish(t: Toy) -> Result<Toy, Error> {
    t.check_fields()?;
    t.inner.check_fields()?;
    if t.inner.period > Duration::from_secs(t.inner.limit) {
        return Err(invalid("period", "must be at most `limit` seconds"));
    }
    Ok(t)
}

fn error_of(r: Result<Toy, impl std::fmt::Display>) -> String {
    r.map(|_| String::new()).unwrap_or_else(|e| e.to_string())
}

#[test]
fn the_builder_sets_each_option_and_the_getters_read_without_cloning() {
    let t = Toy::builder()
        .name(String::from("a"))
        .count(3)
        .wait(Some(Duration::from_millis(5)))
        .tag("x")
        .limit(20)
        .period(Duration::from_secs(2))
        .build()
        .unwrap();
    let name: &str = t.name();
    assert_eq!(
        (name, t.count(), t.wait(), t.tag.as_deref()),
        ("a", 3, Some(Duration::from_millis(5)), Some("x"))
    );
    assert_eq!((t.limit(), t.period()), (20, Duration::from_secs(2)));
    assert_eq!(Toy::builder().build().unwrap(), Toy::default());
}

#[test]
fn checks_name_the_option_in_table_order_then_the_finishing_rules() {
    let e = error_of(Toy::builder().name("a b").count(0).build());
    assert!(e.contains("`name`"), "{e}");
    assert!(error_of(Toy::builder().count(0).build()).contains("`count`"));
    assert!(error_of(Toy::builder().limit(0).build()).contains("`limit`"));
    let e = error_of(Toy::builder().period(Duration::from_secs(11)).build());
    assert!(e.contains("`period`"), "{e}");
}

#[test]
fn a_file_sets_what_it_names_group_options_included_and_is_checked() {
    let t: Toy = toml::from_str(
        r#"
        count = 2
        wait = "1500ms"
        tag = "t"
        limit = 30
        "#,
    )
    .unwrap();
    let expected = Toy::builder()
        .count(2)
        .wait(Some(Duration::from_millis(1500)))
        .tag("t")
        .limit(30)
        .build()
        .unwrap();
    assert_eq!(t, expected);
    let e = toml::from_str::<Toy>("period = \"20s\"").unwrap_err();
    assert!(e.to_string().contains("`period`"), "{e}");
    let e = toml::from_str::<Toy>("inner = 1").unwrap_err();
    assert!(e.to_string().contains("unknown field `inner`"), "{e}");
}
