use streaming::fragment::{Fragment, Input};
use streaming::pipeline;

fn by_word(words: Input<String>) -> impl Fragment<String, Out = String> {
    pipeline! { words.map(|w: String| w.to_lowercase()).key_by(|w: &String| w.clone()) }
}

fn main() {
    let _ = by_word;
}
