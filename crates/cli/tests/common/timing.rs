//! What the benches measure with: the store's timestamps as milliseconds, medians and means.
#![allow(dead_code)]

use serde_json::Value;

/// `2026-12-01T09:44:18.227Z` as milliseconds of the day (enough for a difference).
pub fn millis(at: &Value) -> f64 {
    let text = at.as_str().expect("a timestamp");
    let clock = &text[text.find('T').expect("a time") + 1..text.len() - 1];
    let parts: Vec<f64> = clock.split(':').map(|p| p.parse().expect("a number")).collect();
    (parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]) * 1000.0
}

pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}
