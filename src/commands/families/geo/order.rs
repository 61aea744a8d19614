//! The two sorts Redis' geo searches use, reproduced step for step so that equal (or NaN)
//! distances end up in the same order as in Redis: glibc's `qsort` (a stable top-down
//! merge sort, glibc ≤ 2.36 and again from 2.39) when every result is returned, and
//! Redis' `pqsort` (Bentley–McIlroy quicksort that only recurses into the parts
//! overlapping the wanted prefix) when COUNT keeps the first few.

/// Redis' `sort_gp_asc`: 1, 0 or -1 (NaN compares below everything and everything below
/// NaN, as the C comparisons give).
pub(super) fn compare_distances(a: f64, b: f64) -> i32 {
    if a > b {
        1
    } else if a == b {
        0
    } else {
        -1
    }
}

/// glibc's `msort_with_tmp`: sort each half, then merge taking from the left half while
/// `cmp(left, right) <= 0`.
pub(super) fn merge_sort<T>(v: &mut Vec<T>, cmp: &impl Fn(&T, &T) -> i32) {
    let items = std::mem::take(v);
    *v = sorted(items, cmp);
}

fn sorted<T>(mut items: Vec<T>, cmp: &impl Fn(&T, &T) -> i32) -> Vec<T> {
    if items.len() <= 1 {
        return items;
    }
    let right = items.split_off(items.len() / 2);
    let (left, right) = (sorted(items, cmp), sorted(right, cmp));
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    while let (Some(l), Some(r)) = (left.peek(), right.peek()) {
        let next = if cmp(l, r) <= 0 { left.next() } else { right.next() };
        out.extend(next);
    }
    out.extend(left);
    out.extend(right);
    out
}

/// Redis' `pqsort(v, n, cmp, 0, last)`: afterwards `v[..=last]` holds what a full sort
/// would put there (for a consistent comparator), in Redis' exact arrangement.
pub(super) fn partial_quicksort<T>(v: &mut [T], cmp: &impl Fn(&T, &T) -> i32, last: usize) {
    quick(v, 0, v.len(), cmp, last);
}

/// The median of three positions, as `med3`.
fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> i32) -> usize {
    if cmp(&v[a], &v[b]) < 0 {
        if cmp(&v[b], &v[c]) < 0 {
            b
        } else if cmp(&v[a], &v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) > 0 {
        b
    } else if cmp(&v[a], &v[c]) < 0 {
        a
    } else {
        c
    }
}

/// Swaps `n` elements from `a` with `n` elements from `b`, pairwise in order.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// `_pqsort` on `v[a..a + n]`; `last` is the last wanted index (of the whole slice).
fn quick<T>(v: &mut [T], mut a: usize, mut n: usize, cmp: &impl Fn(&T, &T) -> i32, last: usize) {
    loop {
        if n < 7 {
            for m in a + 1..a + n {
                let mut l = m;
                while l > a && cmp(&v[l - 1], &v[l]) > 0 {
                    v.swap(l, l - 1);
                    l -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let (mut pl, mut pn) = (a, a + n - 1);
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c > 0 {
                    break;
                }
                if c == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c < 0 {
                    break;
                }
                if c == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        // Recurse into (or loop on) a part only if it starts at or before `last`.
        let left = pb - pa;
        if left > 1 && a <= last {
            quick(v, a, left, cmp, last);
        }
        let right = pd - pc;
        if right <= 1 || pn - right > last {
            return;
        }
        a = pn - right;
        n = right;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_key(a: &(u32, u32), b: &(u32, u32)) -> i32 {
        compare_distances(f64::from(a.0), f64::from(b.0))
    }

    #[test]
    fn merge_sort_is_stable() {
        let mut v: Vec<(u32, u32)> = (0..50).map(|i| ((i * 7) % 5, i)).collect();
        merge_sort(&mut v, &by_key);
        for w in v.windows(2) {
            assert!(w[0].0 < w[1].0 || (w[0].0 == w[1].0 && w[0].1 < w[1].1), "{w:?}");
        }
    }

    #[test]
    fn partial_quicksort_sorts_the_prefix() {
        for n in [1usize, 5, 7, 8, 40, 41, 100, 333] {
            for last in [0, n / 3, n - 1] {
                let mut v: Vec<(u32, u32)> = (0..n as u32).map(|i| ((i * 7919) % 97, i)).collect();
                let mut full = v.clone();
                full.sort_by_key(|x| x.0);
                partial_quicksort(&mut v, &by_key, last);
                let keys: Vec<u32> = v[..=last].iter().map(|x| x.0).collect();
                let want: Vec<u32> = full[..=last].iter().map(|x| x.0).collect();
                assert_eq!(keys, want, "n {n} last {last}");
            }
        }
    }
}
