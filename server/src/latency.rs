//! The latency monitor (LATENCY LATEST/HISTORY/RESET/GRAPH/DOCTOR, Redis' `latency.c`):
//! per event class (`command`, `fast-command`, `expire-cycle`), the last 160 seconds with a
//! spike at or above `latency-monitor-threshold` ms, one sample per second (the highest), and
//! the all-time high. LATENCY HISTOGRAM reads the per-command histograms of
//! [`crate::counters::CommandStats`].

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bytes::Bytes;
use rediskv::Reply;

use crate::config::Config;
use crate::counters::CommandStats;
use crate::sync::lock;

/// Samples kept per event, as Redis' `LATENCY_TS_LEN`.
const SAMPLES: usize = 160;

/// One event class's samples: `(unix seconds, ms)`, oldest first, and the all-time high.
#[derive(Debug, Default)]
struct Series {
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// The monitor: its threshold (0: off) and the series of every event seen.
#[derive(Debug, Default)]
pub struct Latency {
    threshold_ms: AtomicU64,
    events: Mutex<BTreeMap<String, Series>>,
}

impl Latency {
    /// Takes `latency-monitor-threshold` from `config` (at start and after CONFIG SET).
    pub fn configure(&self, config: &Config) {
        self.threshold_ms.store(config.number("latency-monitor-threshold").max(0) as u64, Relaxed);
    }

    /// Records that `event` took `usec` µs (now), when the monitor is on and that reaches the
    /// threshold. A command under it costs one atomic load: the clock is read only for a sample.
    #[inline]
    pub fn observe(&self, event: &str, usec: u64) {
        let threshold = self.threshold_ms.load(Relaxed);
        let ms = usec / 1000;
        if threshold == 0 || ms < threshold {
            return;
        }
        self.sample(event, ms);
    }

    #[cold]
    fn sample(&self, event: &str, ms: u64) {
        let unix_secs = crate::clock::unix_secs();
        let mut events = lock(&self.events);
        let series = events.entry(event.to_string()).or_default();
        series.max = series.max.max(ms);
        match series.samples.back_mut() {
            Some(last) if last.0 == unix_secs => last.1 = last.1.max(ms),
            _ => {
                if series.samples.len() == SAMPLES {
                    series.samples.pop_front();
                }
                series.samples.push_back((unix_secs, ms));
            }
        }
    }

    /// `LATENCY <subcommand> …` (argv includes `LATENCY`).
    pub fn command(&self, argv: &[Bytes], stats: &CommandStats, slower_than: i64, now_secs: u64) -> Reply {
        if argv.len() < 2 {
            return Reply::Error("ERR wrong number of arguments for 'latency' command".into());
        }
        let sub = argv.get(1).map(|s| String::from_utf8_lossy(s).to_ascii_lowercase()).unwrap_or_default();
        let event = argv.get(2).map(|e| String::from_utf8_lossy(e).into_owned());
        let events = || lock(&self.events);
        match (sub.as_str(), argv.len()) {
            ("history", 3) => {
                let events = events();
                let samples =
                    event.and_then(|e| events.get(&e)).map(|s| s.samples.iter().collect::<Vec<_>>());
                Reply::Array(samples.unwrap_or_default().into_iter().map(|&(t, ms)| pair(t, ms)).collect())
            }
            ("latest", 2) => Reply::Array(
                events()
                    .iter()
                    .filter_map(|(name, s)| {
                        let &(time, ms) = s.samples.back()?;
                        Some(Reply::Array(vec![
                            Reply::bulk(name.as_bytes()),
                            Reply::Integer(time as i64),
                            Reply::Integer(ms as i64),
                            Reply::Integer(s.max as i64),
                        ]))
                    })
                    .collect(),
            ),
            ("reset", _) => {
                let mut events = events();
                let before = events.len();
                if argv.len() == 2 {
                    events.clear();
                } else {
                    for name in &argv[2..] {
                        events.remove(String::from_utf8_lossy(name).as_ref());
                    }
                }
                Reply::Integer((before - events.len()) as i64)
            }
            ("graph", 3) => {
                let event = event.unwrap_or_default();
                match events().get(&event) {
                    Some(series) => text(graph(&event, series, now_secs)),
                    None => Reply::Error(format!("ERR No samples available for event '{event}'")),
                }
            }
            ("doctor", 2) => text(self.doctor(now_secs, slower_than)),
            ("histogram", _) => histograms(&argv[2..], stats),
            ("help", 2) => Reply::Array(HELP.iter().map(|l| Reply::status(l)).collect()),
            ("history" | "latest" | "graph" | "doctor" | "help", _) => {
                Reply::Error(format!("ERR wrong number of arguments for 'latency|{sub}' command"))
            }
            _ => Reply::Error(format!(
                "ERR unknown subcommand '{}'. Try LATENCY HELP.",
                String::from_utf8_lossy(argv.get(1).map_or(&[][..], |a| a))
            )),
        }
    }

    /// LATENCY DOCTOR's report, in Redis' words: one line per event, then Redis' advice for
    /// the events this server records (slow commands, a slow expiry cycle). `slowlog_usec` is
    /// `slowlog-log-slower-than`.
    fn doctor(&self, now_secs: u64, slowlog_usec: i64) -> String {
        let events = lock(&self.events);
        let threshold = self.threshold_ms.load(Relaxed);
        if events.is_empty() && threshold == 0 {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. \
                    You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. \
                    If we weren't in a deep space mission I'd suggest to take a look at \
                    https://redis.io/topics/latency-monitor.\n"
                .into();
        }
        let mut report = String::new();
        let (mut slowlog_off, mut slowlog_high, mut inspect, mut large, mut scheduler, mut hz) =
            (false, false, false, false, false, false);
        for (n, (name, series)) in events.iter().enumerate() {
            if n == 0 {
                report.push_str(
                    "Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n",
                );
            }
            let count = series.samples.len().max(1) as u64;
            let avg = series.samples.iter().map(|s| s.1).sum::<u64>() / count;
            let mad = series.samples.iter().map(|s| s.1.abs_diff(avg)).sum::<u64>() / count;
            let oldest = series.samples.front().map_or(now_secs, |s| s.0);
            let period = now_secs.saturating_sub(oldest).max(1);
            let _ = writeln!(
                report,
                "{}. {name}: {} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
                n + 1,
                series.samples.len(),
                period as f64 / count as f64,
                series.max
            );
            match name.as_str() {
                "command" => {
                    slowlog_off |= slowlog_usec < 0;
                    slowlog_high |= slowlog_usec >= 0 && (slowlog_usec / 1000) as u64 > threshold;
                    (inspect, large) = (true, true);
                }
                "fast-command" => scheduler = true,
                "expire-cycle" => (hz, large) = (true, true),
                _ => {}
            }
        }
        let advice = [
            (slowlog_off, format!("- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.\n", threshold * 1000)),
            (slowlog_high, format!("- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.\n", threshold * 1000)),
            (inspect, "- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n".into()),
            (scheduler, "- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n".into()),
            (hz, "- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n".into()),
            (large, "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n".into()),
        ];
        if events.is_empty() {
            report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        } else if advice.iter().any(|(on, _)| *on) {
            report.push_str("\nI have a few advices for you:\n\n");
            for (_, text) in advice.iter().filter(|(on, _)| *on) {
                report.push_str(text);
            }
        } else {
            report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        }
        report
    }
}

/// A verbatim `txt` reply (a bulk string in RESP2).
fn text(text: String) -> Reply {
    Reply::Verbatim { format: *b"txt", text: Bytes::from(text) }
}

fn pair(time: u64, ms: u64) -> Reply {
    Reply::Array(vec![Reply::Integer(time as i64), Reply::Integer(ms as i64)])
}

/// LATENCY GRAPH: the header Redis writes, then one column per sample (oldest left), 4 rows
/// high, `#` up to the sample's share of the range, and under each column how long ago it was.
fn graph(event: &str, series: &Series, now_secs: u64) -> String {
    let values: Vec<u64> = series.samples.iter().map(|s| s.1).collect();
    let (min, max) = (values.iter().copied().min().unwrap_or(0), values.iter().copied().max().unwrap_or(0));
    let mut out = format!("{event} - high {max} ms, low {min} ms (all time high {} ms)\n", series.max);
    out.push_str(&"-".repeat(80));
    out.push('\n');
    const ROWS: u64 = 4;
    for row in (1..=ROWS).rev() {
        for &v in &values {
            let height = if max == min { ROWS } else { 1 + (v - min) * (ROWS - 1) / (max - min) };
            out.push(if height >= row { '#' } else { ' ' });
        }
        out.push('\n');
    }
    // Labels written vertically, as Redis' sparkline does.
    let labels: Vec<String> = series.samples.iter().map(|s| ago(now_secs.saturating_sub(s.0))).collect();
    let height = labels.iter().map(String::len).max().unwrap_or(0);
    for i in 0..height {
        for label in &labels {
            out.push(label.as_bytes().get(i).map_or(' ', |&b| b as char));
        }
        out.push('\n');
    }
    out
}

fn ago(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// LATENCY HISTOGRAM [command …]: each named command (a container names its subcommands)
/// that has run, with its call count and cumulative counts per power-of-two µs bucket.
fn histograms(names: &[Bytes], stats: &CommandStats) -> Reply {
    let all = stats.histograms();
    let wanted = |name: &str| {
        names.is_empty()
            || names.iter().any(|n| {
                let n = String::from_utf8_lossy(n).to_ascii_lowercase();
                name == n || name.split_once('|').is_some_and(|(parent, _)| parent == n)
            })
    };
    let entries = all
        .into_iter()
        .filter(|(name, _)| wanted(name))
        .map(|(name, (calls, buckets))| {
            let mut cumulative = 0;
            let mut cdf = Vec::new();
            for (i, n) in buckets.iter().enumerate() {
                if *n > 0 {
                    cumulative += n;
                    cdf.push((Reply::Integer(1i64 << i), Reply::Integer(cumulative as i64)));
                }
            }
            let body = Reply::Map(vec![
                (Reply::bulk(b"calls"), Reply::Integer(calls as i64)),
                (Reply::bulk(b"histogram_usec"), Reply::Map(cdf)),
            ]);
            (Reply::bulk(name.as_bytes()), body)
        })
        .collect();
    Reply::Map(entries)
}

const HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];
