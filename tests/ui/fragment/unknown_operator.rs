use streaming::fragment::{Fragment, Input};
use streaming::pipeline;

fn upper(words: Input<String>) -> impl Fragment<String, Out = String> {
    pipeline! { words.mapp(|w: String| w.to_uppercase()) }
}

fn main() {
    let _ = upper;
}
