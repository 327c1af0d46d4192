//! Which addresses a fetch may connect to: public unicast only. Pure: no resolution, no sockets.
//!
//! The table follows IANA's IPv4 and IPv6 special-purpose address registries (reviewed
//! 2026-12-01): every block those registries do not mark globally reachable is refused, as are a
//! few blocks they do that a fetch has no business reaching (all of 192.0.0.0/24 and 2001::/23,
//! the deprecated 6to4 relay anycast 192.88.99.0/24) and cloud platforms' metadata endpoints. In
//! IPv6 only global unicast (2000::/3) passes at all.
//!
//! An IPv6 address that embeds an IPv4 one (mapped, compatible, NAT64, 6to4) is judged by the IPv4
//! address it carries; Teredo, whose embedded address is obfuscated, is refused outright.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address (or a name) is not fetched. The class is reported; the address never is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    Loopback,
    Unspecified,
    Private,
    SharedAddressSpace,
    LinkLocal,
    Metadata,
    UniqueLocal,
    SiteLocal,
    Multicast,
    Broadcast,
    Reserved,
    Documentation,
    Benchmarking,
    ProtocolAssignments,
    Teredo,
    /// 192.88.99.0/24, the deprecated 6to4 relay anycast (RFC 7526): a relay anyone may run.
    RelayAnycast,
    /// The request would switch protocols (`Connection: upgrade`, `Upgrade`, a `101` answer).
    Upgrade,
}

impl Blocked {
    pub fn as_str(self) -> &'static str {
        match self {
            Blocked::Loopback => "loopback",
            Blocked::Unspecified => "unspecified",
            Blocked::Private => "private",
            Blocked::SharedAddressSpace => "shared_address_space",
            Blocked::LinkLocal => "link_local",
            Blocked::Metadata => "metadata",
            Blocked::UniqueLocal => "unique_local",
            Blocked::SiteLocal => "site_local",
            Blocked::Multicast => "multicast",
            Blocked::Broadcast => "broadcast",
            Blocked::Reserved => "reserved",
            Blocked::Documentation => "documentation",
            Blocked::Benchmarking => "benchmarking",
            Blocked::ProtocolAssignments => "protocol_assignments",
            Blocked::Teredo => "teredo",
            Blocked::RelayAnycast => "relay_anycast",
            Blocked::Upgrade => "upgrade",
        }
    }
}

/// Names of cloud metadata services, refused before any resolution.
const METADATA_NAMES: [&str; 6] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.azure.internal",
];

/// A host name refused by its spelling alone (lowercase, without a trailing dot).
pub fn check_name(name: &str) -> Result<(), Blocked> {
    if METADATA_NAMES.contains(&name) {
        return Err(Blocked::Metadata);
    }
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(Blocked::Loopback);
    }
    Ok(())
}

/// `Ok` for a public unicast address; otherwise the class that refuses it.
pub fn check(ip: IpAddr) -> Result<(), Blocked> {
    match ip {
        IpAddr::V4(v4) => check_v4(v4),
        IpAddr::V6(v6) => check_v6(v6),
    }
}

fn check_v4(ip: Ipv4Addr) -> Result<(), Blocked> {
    let [a, b, c, _] = ip.octets();
    let blocked = match (a, b, c) {
        (0, ..) => Blocked::Unspecified,
        (127, ..) => Blocked::Loopback,
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => Blocked::Private,
        (100, 64..=127, _) => Blocked::SharedAddressSpace,
        (169, 254, 169) if ip.octets()[3] == 254 => Blocked::Metadata,
        // Azure's platform endpoint (WireServer): a public-looking address only VMs reach.
        (168, 63, 129) if ip.octets()[3] == 16 => Blocked::Metadata,
        (169, 254, _) => Blocked::LinkLocal,
        (192, 0, 0) => Blocked::ProtocolAssignments,
        (192, 88, 99) => Blocked::RelayAnycast,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Blocked::Documentation,
        (198, 18..=19, _) => Blocked::Benchmarking,
        (224..=239, ..) => Blocked::Multicast,
        _ if ip == Ipv4Addr::BROADCAST => Blocked::Broadcast,
        (240..=255, ..) => Blocked::Reserved,
        _ => return Ok(()),
    };
    Err(blocked)
}

fn check_v6(ip: Ipv6Addr) -> Result<(), Blocked> {
    if let Some(v4) = embedded_v4(ip) {
        return check_v4(v4);
    }
    let s = ip.segments();
    let blocked = match s {
        [0, 0, 0, 0, 0, 0, 0, 0] => Blocked::Unspecified,
        [0, 0, 0, 0, 0, 0, 0, 1] => Blocked::Loopback,
        [0x2001, 0, ..] => Blocked::Teredo,
        [0x2001, 0xdb8, ..] => Blocked::Documentation,
        [0x3fff, x, ..] if x & 0xf000 == 0 => Blocked::Documentation,
        [0x2001, 2, 0, ..] => Blocked::Benchmarking,
        [0x2001, x, ..] if x < 0x200 => Blocked::ProtocolAssignments,
        [0x0100, 0, 0, 0, ..] => Blocked::Reserved,
        [0x64, 0xff9b, 1, ..] => Blocked::Reserved,
        [x, ..] if x & 0xfe00 == 0xfc00 => Blocked::UniqueLocal,
        [x, ..] if x & 0xffc0 == 0xfe80 => Blocked::LinkLocal,
        [x, ..] if x & 0xffc0 == 0xfec0 => Blocked::SiteLocal,
        [x, ..] if x & 0xff00 == 0xff00 => Blocked::Multicast,
        // Only global unicast (2000::/3) is public.
        [x, ..] if x & 0xe000 != 0x2000 => Blocked::Reserved,
        _ => return Ok(()),
    };
    Err(blocked)
}

/// The IPv4 address an IPv6 one carries: IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible
/// `::a.b.c.d` (not `::` or `::1`), NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:AABB:CCDD::`.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = |hi: u16, lo: u16| Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, hi, lo] => Some(low(hi, lo)),
        [0, 0, 0, 0, 0, 0, hi, lo] if (hi, lo) != (0, 0) && (hi, lo) != (0, 1) => Some(low(hi, lo)),
        [0x64, 0xff9b, 0, 0, 0, 0, hi, lo] => Some(low(hi, lo)),
        [0x2002, hi, lo, ..] => Some(low(hi, lo)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Boundary rows, smokescreen-style: the first and last address of each block this review
    /// added, and the public neighbours on either side. Pure: nothing here is connected to.
    #[test]
    fn the_blocks_added_in_review_end_exactly_where_the_registries_say() {
        let cases: &[(&str, Result<(), Blocked>)] = &[
            ("192.88.98.255", Ok(())),
            ("192.88.99.0", Err(Blocked::RelayAnycast)),
            ("192.88.99.255", Err(Blocked::RelayAnycast)),
            ("192.88.100.0", Ok(())),
            ("2002:c058:6301::1", Err(Blocked::RelayAnycast)),
            ("168.63.129.15", Ok(())),
            ("168.63.129.16", Err(Blocked::Metadata)),
            ("168.63.129.17", Ok(())),
            ("192.0.0.255", Err(Blocked::ProtocolAssignments)),
            ("192.0.1.0", Ok(())),
            ("2001:1ff:ffff::1", Err(Blocked::ProtocolAssignments)),
            ("2001:200::1", Ok(())),
            ("5f00::1", Err(Blocked::Reserved)),
            ("fd00:ec2::254", Err(Blocked::UniqueLocal)),
            ("::ffff:0:7f00:1", Err(Blocked::Reserved)),
        ];
        for (text, expected) in cases {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(check(ip), *expected, "{text}");
        }
    }
}
