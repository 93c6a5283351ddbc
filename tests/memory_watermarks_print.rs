//! User-defined watermark generators and `print` through `tracing`.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use streaming::time::{TumblingEventTimeWindows, WatermarkGenerator, WatermarkOutput};
use streaming::MemoryEnv;

/// Raises the watermark only on "tick" elements, to the tick's timestamp, and tries to
/// lower it on "rewind" elements (ignored: watermarks are monotone). `on_periodic_emit` runs
/// once per element and counts calls.
#[derive(Clone)]
struct Punctuated {
    periodic_calls: Arc<Mutex<u32>>,
}

impl WatermarkGenerator<(&'static str, i64)> for Punctuated {
    fn on_event(&mut self, e: &(&'static str, i64), timestamp: i64, out: &mut WatermarkOutput) {
        match e.0 {
            "tick" => {
                out.raise(timestamp);
            }
            "rewind" => {
                assert!(!out.raise(i64::MIN + 1), "a lower watermark is ignored");
            }
            "idle" => out.mark_idle(),
            _ => {}
        }
    }
    fn on_periodic_emit(&mut self, _out: &mut WatermarkOutput) {
        *self.periodic_calls.lock().unwrap() += 1;
    }
}

#[test]
fn user_generator_owns_the_watermark() {
    let calls = Arc::new(Mutex::new(0));
    let env = MemoryEnv::new();
    let fired = std::cell::RefCell::new(Vec::new());
    env.from_collection(vec![
        ("x", 1i64),
        ("x", 2),
        ("tick", 10),
        ("x", 3),
        ("rewind", 50),
        ("idle", 51),
        ("x", 12),
    ])
    .assign_timestamps_and_watermarks_with(
        |e: &(&str, i64), _| e.1,
        Punctuated {
            periodic_calls: calls.clone(),
        },
    )
    .key_by(|_| ())
    .window(TumblingEventTimeWindows::of(Duration::from_millis(10)).unwrap())
    .side_output_late_data(|e: (&str, i64)| fired.borrow_mut().push(format!("late {}", e.1)))
    .count()
    .for_each(|((), w, n)| {
        fired
            .borrow_mut()
            .push(format!("[{},{}) {n}", w.start(), w.end()))
    })
    .unwrap();
    // The tick at 10 moves the watermark to 10: [0,10) fires with 1, 2 and nothing else;
    // 3 is late. The rewind and idle changes nothing; the rest fires at end of input.
    assert_eq!(
        fired.into_inner(),
        vec!["[0,10) 2", "late 3", "[10,20) 2", "[50,60) 2"]
    );
    assert_eq!(
        *calls.lock().unwrap(),
        7,
        "on_periodic_emit once per element"
    );
}

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn print_logs_each_record_at_info_through_tracing() {
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let env = MemoryEnv::new();
        env.from_elements([1, 2]).print().unwrap();
        env.from_elements(["a"]).print_with_prefix("words").unwrap();
    });
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains(" INFO streaming::print: 1"), "{text}");
    assert!(lines[1].ends_with("streaming::print: 2"), "{text}");
    assert!(
        lines[2].ends_with("streaming::print: words> \"a\""),
        "{text}"
    );
}
