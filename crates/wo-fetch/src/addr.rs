//! Which IP addresses a fetch may connect to.
//!
//! Only globally routable unicast addresses pass. Everything that could reach the local
//! machine, the local network, a cloud metadata endpoint or a special-purpose range is refused,
//! including IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4), because an
//! OS will happily route `::ffff:127.0.0.1` to the loopback interface.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `ip` must not be contacted, or `None` when it is a public unicast address.
pub fn refusal_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    // Ordered from most to least specific so the reason names the narrowest range.
    if ip.is_unspecified() {
        Some("unspecified address")
    } else if ip.is_broadcast() {
        Some("broadcast address")
    } else if ip.is_loopback() {
        Some("loopback address")
    } else if ip.is_private() {
        Some("private address (RFC 1918)")
    } else if ip.is_link_local() {
        Some("link-local address")
    } else if ip.is_multicast() {
        Some("multicast address")
    } else if a == 0 {
        Some("\"this network\" address (0.0.0.0/8)")
    } else if a == 100 && (b & 0xc0) == 64 {
        Some("carrier-grade NAT address (100.64.0.0/10)")
    } else if a == 192 && b == 0 && c == 0 {
        Some("IETF protocol assignment (192.0.0.0/24)")
    } else if (a, b, c) == (192, 0, 2) || (a, b, c) == (198, 51, 100) || (a, b, c) == (203, 0, 113)
    {
        Some("documentation address")
    } else if a == 198 && (b & 0xfe) == 18 {
        Some("benchmarking address (198.18.0.0/15)")
    } else if a >= 240 {
        Some("reserved address (240.0.0.0/4)")
    } else {
        None
    }
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let seg = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified address");
    }
    if ip.is_loopback() {
        return Some("loopback address");
    }
    if ip.is_multicast() {
        return Some("multicast address");
    }
    if (seg[0] & 0xfe00) == 0xfc00 {
        return Some("unique local address (fc00::/7)");
    }
    if (seg[0] & 0xffc0) == 0xfe80 {
        return Some("link-local address (fe80::/10)");
    }
    if (seg[0] & 0xffc0) == 0xfec0 {
        return Some("site-local address (fec0::/10)");
    }
    if seg[0] == 0x2001 && seg[1] == 0x0db8 {
        return Some("documentation address (2001:db8::/32)");
    }
    if seg[0] == 0x2001 && seg[1] == 0x0002 && seg[2] == 0 {
        return Some("benchmarking address (2001:2::/48)");
    }
    if seg[0] == 0x2001 && seg[1] == 0 {
        // Teredo hides an IPv4 endpoint behind obfuscation; no public page needs it.
        return Some("Teredo address (2001::/32)");
    }
    if seg[0] == 0x0100 && seg[1..4] == [0, 0, 0] {
        return Some("discard-only address (100::/64)");
    }
    // Forms that carry an IPv4 address: judge the embedded address, since that is where the
    // packets can end up.
    let embedded = if seg[..5] == [0, 0, 0, 0, 0] && (seg[5] == 0xffff || seg[5] == 0) {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (deprecated compatible form).
        Some(Ipv4Addr::new(
            (seg[6] >> 8) as u8,
            seg[6] as u8,
            (seg[7] >> 8) as u8,
            seg[7] as u8,
        ))
    } else if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        // NAT64 well-known prefix 64:ff9b::/96.
        Some(Ipv4Addr::new(
            (seg[6] >> 8) as u8,
            seg[6] as u8,
            (seg[7] >> 8) as u8,
            seg[7] as u8,
        ))
    } else if seg[0] == 0x2002 {
        // 6to4 2002:a.b.c.d::/48.
        Some(Ipv4Addr::new(
            (seg[1] >> 8) as u8,
            seg[1] as u8,
            (seg[2] >> 8) as u8,
            seg[2] as u8,
        ))
    } else {
        None
    };
    if let Some(v4) = embedded {
        return v4_reason(v4).map(|_| "IPv6 form of a refused IPv4 address");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(s: &str) -> bool {
        refusal_reason(s.parse().unwrap()).is_some()
    }

    #[test]
    fn special_ranges_are_refused() {
        for s in [
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "224.0.0.1",
            "239.255.255.250",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "198.19.255.1",
            "240.0.0.1",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "2001:2::1",
            "2001:0:4136:e378::1",
            "100::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
        ] {
            assert!(refused(s), "{s} should be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "198.20.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "2002:0808:0808::1",
        ] {
            assert!(!refused(s), "{s} should be allowed");
        }
    }
}
