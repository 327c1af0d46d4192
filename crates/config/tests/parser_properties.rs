//! Properties of the strict parser over generated inputs (a fixed-seed generator, so every run
//! checks the same cases): it never panics, and it refuses a duplicate key at any depth.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use conduit_config::parse;

/// xorshift64*: small, deterministic, good enough to explore shapes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random JSON value as text; `dup_depth` plants one duplicate key in the object at that depth.
fn value(rng: &mut Rng, depth: u32, dup_depth: Option<u32>) -> String {
    let must_nest = dup_depth.is_some_and(|d| d >= depth);
    match if must_nest { 5 } else { rng.below(7) } {
        0 => "null".into(),
        1 => ["true", "false"][rng.below(2) as usize].into(),
        2 => format!("{}", rng.below(1000) as i64 - 500),
        3 => format!("\"s{}\"", rng.below(100)),
        4 if depth < 6 => format!(
            "[{}]",
            (0..rng.below(3))
                .map(|_| value(rng, depth + 1, None))
                .collect::<Vec<_>>()
                .join(",")
        ),
        _ if depth < 6 || must_nest => object(rng, depth, dup_depth),
        _ => "0".into(),
    }
}

fn object(rng: &mut Rng, depth: u32, dup_depth: Option<u32>) -> String {
    let mut fields: Vec<String> = (0..rng.below(3) + 1)
        .map(|i| {
            let inner = dup_depth.filter(|d| *d > depth && i == 0);
            format!("\"k{i}\":{}", value(rng, depth + 1, inner))
        })
        .collect();
    if dup_depth == Some(depth) {
        fields.push(format!("\"k0\":{}", value(rng, depth + 1, None)));
    }
    format!("{{{}}}", fields.join(","))
}

#[test]
fn the_parser_never_panics() {
    let mut rng = Rng(0x5eed_0001);
    for _ in 0..3000 {
        let mut text = value(&mut rng, 0, None).into_bytes();
        // Corrupt some inputs byte by byte, to reach the error paths too.
        if rng.below(2) == 0 && !text.is_empty() {
            let at = rng.below(text.len() as u64) as usize;
            text[at] = rng.below(256) as u8;
        }
        let _ = parse(&text);
    }
}

#[test]
fn a_duplicate_key_is_refused_at_any_depth() {
    let mut rng = Rng(0x5eed_0002);
    for case in 0..2000 {
        let depth = rng.below(5) as u32;
        let text = object(&mut rng, 0, Some(depth));
        let found = parse(text.as_bytes()).expect_err("a duplicate key must be refused");
        assert!(
            found.iter().any(|d| d.code == "duplicate_key"),
            "case {case}: {text}\n{found:?}"
        );
    }
}
