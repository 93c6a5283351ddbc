use std::rc::Rc;
use streaming::fragment::{Fragment, Input};
use streaming::pipeline;

fn tagged(words: Input<String>) -> impl Fragment<String, Out = (Rc<str>, String)> {
    let tag: Rc<str> = Rc::from("t");
    pipeline! { words.map(move |w: String| (Rc::clone(&tag), w)) }
}

fn main() {
    let _ = tagged;
}
