//! Time as plain numbers: milliseconds since the Unix epoch, passed in by the edges.

use serde::{Deserialize, Serialize, Serializer};

/// A point in time, in milliseconds since the Unix epoch (UTC).
///
/// Serialized as an RFC 3339 string for humans and clients; stored as the integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(from = "i64")]
pub struct Timestamp(pub i64);

/// A source of the current time. Rules never read the system clock; the edges hand one in, and tests
/// hand in one they control.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// A span of time in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Duration(pub i64);

impl From<i64> for Timestamp {
    fn from(ms: i64) -> Self {
        Timestamp(ms)
    }
}

impl Timestamp {
    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(d.0))
    }

    /// The time an RFC 3339 text (`2026-12-01T16:00:00Z`, fractions allowed) names.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let t = humantime::parse_rfc3339_weak(text).ok()?;
        let ms = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
        i64::try_from(ms).ok().map(Timestamp)
    }

    /// RFC 3339 in UTC with millisecond precision.
    pub fn to_rfc3339(self) -> String {
        let ms = u64::try_from(self.0).unwrap_or(0);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        humantime::format_rfc3339_millis(t).to_string()
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl Duration {
    pub const fn from_secs(secs: i64) -> Duration {
        Duration(secs * 1000)
    }

    /// Parses a human duration such as `30s`, `10m` or `1h 30m`.
    pub fn parse(text: &str) -> Option<Duration> {
        let d = humantime::parse_duration(text).ok()?;
        i64::try_from(d.as_millis()).ok().map(Duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_rfc3339_with_millis() {
        assert_eq!(Timestamp(1_500).to_rfc3339(), "1970-01-01T00:00:01.500Z");
    }

    #[test]
    fn parses_rfc3339_back_to_the_millisecond() {
        let t = Timestamp(1_764_604_800_123);
        assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Some(t));
        assert_eq!(Timestamp::parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn parses_human_durations() {
        assert_eq!(Duration::parse("10m"), Some(Duration(600_000)));
        assert_eq!(Duration::parse("1h 30m"), Some(Duration(5_400_000)));
        assert_eq!(Duration::parse("soon"), None);
    }
}
