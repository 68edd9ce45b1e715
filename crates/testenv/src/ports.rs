//! Ports for the test environment's processes to listen on.
//!
//! Asking the kernel for a free port (bind port 0, read the number, close) hands out a port
//! of the ephemeral range, and it stays free only until the next process binds port 0 or
//! opens a connection. In one e2e start, kwok's internal HTTP server was given the CAPI
//! manager's health port between the moment it was chosen and the moment the manager bound
//! it: the manager exited with "address already in use", and kwok answered the readiness
//! probe in its place. The kernel never hands out a port below the ephemeral range on its
//! own, so a port chosen there stays free until a process asks for that very number.

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::net::TcpListener;
use std::sync::Mutex;

/// The lowest port chosen; below it lie well-known and registered services' usual ports.
const LOWEST: u16 = 10_000;

/// Ports this process has handed out (they are free again once chosen, so without this a
/// second call could return the first one before its process binds it).
static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A port on 127.0.0.1 that nothing listens on now, below the kernel's ephemeral range
/// when there is room there, never one this process handed out before.
pub fn free_port() -> std::io::Result<u16> {
    let (ephemeral_low, _) = ephemeral_range().unwrap_or((32_768, 60_999));
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(span) = ephemeral_low.checked_sub(LOWEST).filter(|s| *s >= 1_000) {
        for attempt in 0u32..512 {
            let draw = std::collections::hash_map::RandomState::new().hash_one(attempt);
            let port = LOWEST + u16::try_from(draw % u64::from(span)).unwrap_or(0);
            if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return Ok(port);
            }
        }
    }
    // No room below the ephemeral range (or all of it taken): the kernel's choice.
    loop {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if given.insert(port) {
            return Ok(port);
        }
    }
}

/// The kernel's ephemeral port range (`ip_local_port_range`).
fn ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut parts = text.split_whitespace().map(|v| v.parse::<u16>().ok());
    Some((parts.next()??, parts.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_outside_the_ephemeral_range() {
        let (low, high) = ephemeral_range().unwrap_or((32_768, 60_999));
        let ports: Vec<u16> = (0..50).map(|_| free_port().expect("a free port")).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            ports.len(),
            "a port handed out twice: {ports:?}"
        );
        for p in &ports {
            if low >= LOWEST + 1_000 {
                assert!(
                    *p >= LOWEST && *p < low,
                    "{p} is not below the ephemeral range {low}-{high}"
                );
            }
            // Nothing listens on it: we can.
            TcpListener::bind(("127.0.0.1", *p)).expect("the port is free");
        }
    }
}
