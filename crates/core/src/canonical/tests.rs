use super::*;
use serde_json::json;

/// What `serde_jcs` alone prints: the reference the direct path must match byte for byte.
fn reference(value: &Value) -> String {
    serde_jcs::to_string(value).unwrap()
}

#[test]
fn key_order_and_whitespace_do_not_matter() {
    let a: Value = serde_json::from_str(r#"{"b": 1, "a": [true, null]}"#).unwrap();
    assert_eq!(canonical_json(&a), r#"{"a":[true,null],"b":1}"#);
    assert_eq!(canonical_hash(&a), canonical_hash(&json!({"a": [true, null], "b": 1})));
}

#[test]
fn numbers_follow_ecmascript() {
    assert_eq!(canonical_json(&json!(1e21)), "1e+21");
    assert_eq!(canonical_json(&json!(1.0)), "1");
}

#[test]
fn the_hash_is_the_sha256_of_the_canonical_text() {
    let value = json!({"message": "hi", "n": [1, -2, 3.5]});
    assert_eq!(canonical_hash(&value), sha256_hex(canonical_json(&value).as_bytes()));
    assert_eq!(
        canonical_hash(&json!({})),
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
}

/// The direct path is on in this build: `serde_json` keeps keys sorted and numbers as machine
/// values. Should a dependency turn on a feature that breaks either, every value goes through
/// `serde_jcs` (correct, slower) and this test says so.
#[test]
fn the_direct_path_holds_in_this_build() {
    assert!(*DIRECT_PATH_HOLDS);
    let value: Value = serde_json::from_str(r#"{"b": 1, "é": 2, "a": 3, "B": 4}"#).unwrap();
    let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["B", "a", "b", "é"]);
}

/// Each row is a value at a boundary of the direct path: whether it takes it, and (either way) that
/// the text is the scheme's own.
#[test]
fn the_direct_path_prints_exactly_what_the_scheme_does_at_its_boundaries() {
    let rows: Vec<(Value, bool)> = vec![
        (json!(9_007_199_254_740_992_u64), true),
        (json!(-9_007_199_254_740_992_i64), true),
        // Past 2^53 the scheme prints the nearest double: ...992, not ...993.
        (json!(9_007_199_254_740_993_u64), false),
        (json!(-9_007_199_254_740_993_i64), false),
        (json!(u64::MAX), false),
        (json!(i64::MIN), false),
        (json!(0.5), false),
        (serde_json::from_str("-0").unwrap(), false),
        (
            json!("quote \" back \\ nl \n tab \t cr \r ff \u{c} bs \u{8} nul \u{0} us \u{1f} del \u{7f} /"),
            true,
        ),
        (json!("é ü 中 \u{d7ff} \u{e000} \u{ffff} \u{10000} 😀"), true),
        (json!({"b": 1, "a": 2, "ab": 3, "B": 4, "": 5}), true),
        (json!({"é": 1, "z": 2, "\u{d7ff}": 3}), true),
        // Byte order puts U+E000 first; UTF-16 puts U+10000 (a surrogate pair from 0xD800) first.
        (json!({"\u{e000}": 1, "\u{10000}": 2}), false),
        (json!({"\u{ffff}": 1, "a": 2}), false),
        (json!({"outer": [{"b": [1, 1.0]}, {"a": null}]}), false),
        (json!({"outer": [{"b": [9_007_199_254_740_993_u64]}]}), false),
        (json!({"outer": [{"b": [1, 2]}, {"a": null}], "t": true}), true),
    ];
    for (value, direct) in rows {
        assert_eq!(prints_canonically(&value), direct, "{value}");
        assert_eq!(canonical_json(&value), reference(&value), "{value}");
        assert_eq!(
            canonical_hash(&value),
            sha256_hex(reference(&value).as_bytes()),
            "{value}"
        );
    }
}

/// Integers past 2^53 are the one place two different values share a canonical form: the rule that
/// finds them, at its boundary and at depth.
#[test]
fn integers_past_two_to_the_53_are_found_where_they_would_share_a_hash() {
    let (edge, past) = (json!(9_007_199_254_740_992_u64), json!(9_007_199_254_740_993_u64));
    assert_eq!(
        canonical_hash(&past),
        canonical_hash(&edge),
        "the collision the rule guards"
    );
    let rows = [
        (
            json!({"n": 9_007_199_254_740_992_u64, "m": -9_007_199_254_740_992_i64}),
            true,
        ),
        (json!({"f": 1e300, "g": -0.5, "s": "9007199254740993"}), true),
        (json!({"n": 9_007_199_254_740_993_u64}), false),
        (json!([{"deep": [-9_007_199_254_740_993_i64]}]), false),
        (json!(u64::MAX), false),
    ];
    for (value, exact) in rows {
        assert_eq!(integers_are_exact(&value), exact, "{value}");
    }
}

/// Values drawn from a fixed sequence, weighted toward the boundaries above: the direct path and
/// the scheme agree on every one.
#[test]
fn drawn_values_print_as_the_scheme_prints_them() {
    const DRAWN: usize = 3000;
    let mut draw = Draw(0x9e37_79b9_7f4a_7c15);
    let mut direct = 0;
    for _ in 0..DRAWN {
        let value = draw.value(3);
        direct += usize::from(prints_canonically(&value));
        assert_eq!(canonical_json(&value), reference(&value), "{value}");
    }
    // Both paths were exercised.
    assert!(
        direct > DRAWN / 10 && direct < DRAWN * 9 / 10,
        "{direct} of {DRAWN} direct"
    );
}

/// A xorshift sequence, so every run draws the same values.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> usize {
        usize::try_from(self.next() % n).unwrap()
    }

    fn value(&mut self, depth: u32) -> Value {
        let pick = if depth == 0 { self.below(4) } else { self.below(6) };
        match pick {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => self.number(),
            3 => Value::String(self.text()),
            4 => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
            _ => Value::Object(
                (0..self.below(4))
                    .map(|_| (self.text(), self.value(depth - 1)))
                    .collect(),
            ),
        }
    }

    fn number(&mut self) -> Value {
        const EDGES: [i64; 5] = [0, 1, -1, 1 << 53, -(1 << 53)];
        match self.below(5) {
            0 => json!(EDGES[self.below(5)]),
            1 => json!(EDGES[self.below(5)].saturating_add(1)),
            2 => json!(self.next()),
            3 => json!(i64::from_ne_bytes(self.next().to_ne_bytes()) >> self.below(64)),
            _ => json!(f64::from(u32::try_from(self.next() >> 40).unwrap()) / 64.0),
        }
    }

    fn text(&mut self) -> String {
        const CHARS: [char; 12] = [
            'a', 'b', 'Z', '"', '\\', '\n', '\u{1}', 'é', '\u{d7ff}', '\u{e000}', '\u{ffff}', '😀',
        ];
        (0..self.below(4)).map(|_| CHARS[self.below(12)]).collect()
    }
}
