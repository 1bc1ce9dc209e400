//! Probes: small calls that each lean on one part of a processor core, timed beside relent-core's
//! decision and backon's step by relent-tests' `alternatives -- --states`.
//!
//! Why: on the development machine the decision's ratio to backon's step changes with the
//! machine's state, 1.0x in its fastest state and about 1.3x in the others (docs/performance.md).
//! Timing calls whose cost is known to come from one resource (issue width, a chain of dependent
//! instructions, floating-point latency, cache lines, branches) in the same blocks shows which
//! resources the slower state takes away, and so what a faster decision would have to spend less
//! of. Each probe takes its input through [`black_box`] and is never inlined, so that the compiler
//! cannot fold it into its caller's loop.

use std::hint::black_box;

/// About 230 instructions of integer work in four independent chains, in registers: bound by how
/// many instructions a cycle the core issues.
#[inline(never)]
pub fn issue_width(x: u64) -> u64 {
    let x = black_box(x);
    let (mut a, mut b, mut c, mut d) = (x, x ^ 0x9e37, x.rotate_left(7), x.wrapping_mul(3));
    for _ in 0..9 {
        a = a.wrapping_add(b).rotate_left(13) ^ c;
        b = b.wrapping_add(c).rotate_left(17) ^ d;
        c = c.wrapping_add(d).rotate_left(5) ^ a;
        d = d.wrapping_add(a).rotate_left(29) ^ b;
        a ^= a >> 3;
        b ^= b >> 5;
        c ^= c >> 7;
        d ^= d >> 11;
    }
    a ^ b ^ c ^ d
}

/// About 230 instructions of integer work in one chain, each instruction waiting for the one
/// before: bound by latency, not issue width. Straight-line code, as [`issue_width`] is.
#[inline(never)]
pub fn latency_chain(x: u64) -> u64 {
    let mut a = black_box(x);
    macro_rules! chain {
        ($($i:literal)*) => {$(
            a = (a ^ ($i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left($i % 63 + 1).wrapping_add($i);
        )*};
    }
    chain!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36
        37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57);
    a
}

/// Six rounds of a floating-point multiply, add, minimum and divide, each waiting for the one
/// before: bound by the float unit's latency, as backon's step is.
#[inline(never)]
pub fn float_chain(x: f64) -> f64 {
    let mut v = black_box(x);
    for _ in 0..6 {
        v = (v * 1.0001 + 0.5).min(2.0e9) / 1.00007;
    }
    v
}

/// One cache line: eight words, aligned to 64 bytes.
#[repr(align(64))]
#[derive(Clone, Copy, Debug, Default)]
pub struct Line(pub [u64; 8]);

/// Reads and writes one word of each of `lines` (about four instructions a line): bound by the
/// first-level data cache when the lines are many, as relent-core's decision touches 18 (the
/// operation, the dependency's window and breaker, the policy, the configuration, the generator,
/// its stack frame).
#[inline(never)]
pub fn cache_lines(lines: &mut [Line], x: u64) -> u64 {
    let mut s = black_box(x);
    for line in lines.iter_mut() {
        line.0[0] = line.0[0].wrapping_add(s);
        s ^= line.0[1];
    }
    s
}

/// Forty conditional branches, each at its own place in the code and each going the same way every
/// call (to a cold path that is never run for values above 5), as relent-core's decision's checks
/// are (is each protection configured, is this the attempt out, is there time left): bound by the
/// branch units and the predictor's tables.
#[inline(never)]
pub fn branches(values: &[u64; 40]) -> u64 {
    let v = black_box(values);
    let mut s = 0u64;
    macro_rules! checks {
        ($($i:literal)*) => {$(
            if v[$i] > 5 {
                s = s.wrapping_add(v[$i]);
            } else {
                s = rare(s, $i);
            }
        )*};
    }
    checks!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36
        37 38 39);
    s
}

/// The other way of [`branches`]' branches: out of line and cold, so that the compiler keeps each
/// branch a branch rather than a conditional move.
#[cold]
#[inline(never)]
fn rare(s: u64, i: u32) -> u64 {
    s ^ (0x55 << (i % 7))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The probes are timed, not checked for their results, but each must compute from its input
    // (or the compiler could drop the work): a different input gives a different result.
    #[test]
    fn each_probe_depends_on_its_input() {
        assert_ne!(issue_width(1), issue_width(2));
        assert_ne!(latency_chain(1), latency_chain(2));
        assert_ne!(float_chain(1.0), float_chain(2.0));
        let mut lines = [Line([1; 8]); 12];
        assert_ne!(cache_lines(&mut lines, 1), cache_lines(&mut lines, 2));
        assert_eq!(lines[0].0[0], 1 + 1 + 2, "each call writes each line");
        assert_ne!(branches(&[9; 40]), branches(&[1; 40]));
        assert_eq!(branches(&[9; 40]), 360, "values above 5 are summed");
    }
}
