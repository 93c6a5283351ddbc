#!/usr/bin/env bash
# Build-time cost of `pipeline!` (issue #3 §4): a crate with 20 pipelines written with the
# macro vs the same 20 pipelines written as builder chains. Deps are built once; then the
# test crate alone is rebuilt (touch + `cargo build`) RUNS times per variant.
# Usage: streaming-macros/bench/build_time.sh [runs]   (one line per profile and variant)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

gen() { # $1 = macro|builder
python3 - "$1" <<'PY'
import sys
style = sys.argv[1]
out = ["#![allow(missing_docs, clippy::all)]",
       "use std::time::Duration;",
       "use streaming::time::{AscendingTimestamps, TumblingEventTimeWindows};",
       "use streaming::{Error, MemoryEnv};",
       "use streaming::pipeline;" if style == "macro" else "use streaming::api::ValueStateDescriptor;", ""]
for i in range(20):
    k = i % 4
    m = i + 2
    if k == 0:
        body = (f"env.from_collection(0..n).map(|x: u64| x * {m}).filter(|x: &u64| x % {m + 1} != 0)"
                f".map(|x: u64| x + {i}).collect_vec()")
        mac = body
        bld = body
    elif k == 1:
        mac = (f"env.from_collection(0..n).assign_timestamps_and_watermarks_with(|x: &u64, _| *x as i64, AscendingTimestamps)"
               f".key_by(|x: &u64| x % {m}).window(TumblingEventTimeWindows::of(Duration::from_millis({10 + i}))).count()"
               f".map(|(k, _w, c): (u64, streaming::time::TimeWindow, u64)| k + c).collect_vec()")
        bld = mac.replace(f"Duration::from_millis({10 + i})))", f"Duration::from_millis({10 + i}))?)")
    elif k == 2:
        mac = (f"env.from_collection(0..n).key_by(|x: &u64| x % {m}).state(seen: ValueState<u64> = 0)"
               f".process(|x: u64, ctx, out| {{ let s = ctx.state(seen)?.value() + x; ctx.state(seen)?.update(s); out.collect(s); Ok(()) }})"
               f".collect_vec()")
        bld = (f"env.from_collection(0..n).key_by(|x: &u64| x % {m})"
               f".process(|x: u64, ctx, out| {{ let s = ctx.state(&SEEN_{i})?.value() + x; ctx.state(&SEEN_{i})?.update(s); out.collect(s); Ok(()) }})"
               f".collect_vec()")
        if style != "macro":
            out.append(f"const SEEN_{i}: ValueStateDescriptor<u64> = ValueStateDescriptor::new(\"seen\", 0);")
    else:
        mac = (f"env.from_collection(0..n).map(|x: u64| (x % {m}, x)).key_by(|p: &(u64, u64)| p.0)"
               f".reduce(|a, b| (a.0, a.1 + b.1)).collect_vec()")
        bld = mac
    if style == "macro":
        out.append(f"pub fn p{i}(env: &MemoryEnv, n: u64) -> Result<usize, Error> {{ Ok(pipeline! {{ {mac} }}?.len()) }}")
    else:
        out.append(f"pub fn p{i}(env: &MemoryEnv, n: u64) -> Result<usize, Error> {{ Ok({bld}?.len()) }}")
print("\n".join(out))
PY
}

for profile in dev release; do
for variant in macro builder; do
  dir="$work/$variant"
  mkdir -p "$dir/src"
  cat >"$dir/Cargo.toml" <<TOML
[package]
name = "build-time-$variant"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
streaming = { path = "$repo/streaming" }
[workspace]
TOML
  gen "$variant" >"$dir/src/lib.rs"
  (cd "$dir" && CARGO_TARGET_DIR="$work/target-$variant" cargo build -q --profile "$profile" 2>&1)
  times=()
  for _ in $(seq "$runs"); do
    touch "$dir/src/lib.rs"
    start=$(date +%s.%N)
    (cd "$dir" && CARGO_TARGET_DIR="$work/target-$variant" cargo build -q --profile "$profile" 2>&1)
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc)")
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
  median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  echo "$profile $variant: median ${median}s of $runs rebuilds (all: $sorted)"
done
done
