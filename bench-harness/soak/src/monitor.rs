//! Watches the server child through /proc: resident memory (VmRSS), open descriptors, and
//! whether it is still alive.

use std::fs;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How often the sampler reads /proc.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// When the "after the first minute" memory reading is taken.
const FIRST_MINUTE: Duration = Duration::from_secs(60);

/// One reading of the child's /proc entries.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Resident set size, KiB.
    pub rss_kib: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// The process has exited (a zombie waiting for us, or gone).
    pub dead: bool,
}

/// Reads `/proc/<pid>/status` and counts `/proc/<pid>/fd`.
pub fn sample(pid: u32) -> io::Result<Sample> {
    let status = match fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => s,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Sample {
                rss_kib: 0,
                fds: 0,
                dead: true,
            });
        }
        Err(e) => return Err(e),
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    let dead = field("State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X'));
    if dead {
        return Ok(Sample {
            rss_kib: 0,
            fds: 0,
            dead,
        });
    }
    let rss_kib = field("VmRSS:")
        .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| io::Error::other("no VmRSS in /proc/<pid>/status"))?;
    let fds = fs::read_dir(format!("/proc/{pid}/fd"))?.count() as u64;
    Ok(Sample { rss_kib, fds, dead })
}

/// First, lowest, highest and last value of a series.
#[derive(Debug, Clone, Copy, Default)]
pub struct Range {
    /// The first value (the baseline).
    pub first: u64,
    /// The lowest value.
    pub min: u64,
    /// The highest value.
    pub max: u64,
    /// The latest value.
    pub last: u64,
}

impl Range {
    fn starting_at(v: u64) -> Range {
        Range {
            first: v,
            min: v,
            max: v,
            last: v,
        }
    }

    fn add(&mut self, v: u64) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.last = v;
    }
}

/// What the sampler has seen so far.
#[derive(Debug, Clone, Copy)]
pub struct Readings {
    /// VmRSS, KiB.
    pub rss_kib: Range,
    /// Open descriptors.
    pub fds: Range,
    /// VmRSS at the first sample one minute or more after the start, KiB.
    pub first_minute_rss_kib: Option<u64>,
    /// The child was seen dead.
    pub child_died: bool,
    /// Samples taken.
    pub samples: u64,
}

/// The sampler: readings of one process, shared with the thread that takes them.
#[derive(Debug)]
pub struct Monitor {
    pid: u32,
    started: Instant,
    readings: Mutex<Readings>,
}

impl Monitor {
    /// Starts watching `pid`, taking the baseline sample now.
    pub fn new(pid: u32) -> io::Result<Monitor> {
        let s = sample(pid)?;
        Ok(Monitor {
            pid,
            started: Instant::now(),
            readings: Mutex::new(Readings {
                rss_kib: Range::starting_at(s.rss_kib),
                fds: Range::starting_at(s.fds),
                first_minute_rss_kib: None,
                child_died: s.dead,
                samples: 1,
            }),
        })
    }

    /// A copy of the readings so far.
    pub fn readings(&self) -> Readings {
        *self.readings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes one sample and adds it to the readings (a failed read counts as a dead child).
    pub fn take(&self) -> Readings {
        let s = sample(self.pid).unwrap_or(Sample {
            rss_kib: 0,
            fds: 0,
            dead: true,
        });
        let mut r = self.readings.lock().unwrap_or_else(PoisonError::into_inner);
        r.samples += 1;
        if s.dead {
            r.child_died = true;
            return *r;
        }
        r.rss_kib.add(s.rss_kib);
        r.fds.add(s.fds);
        if r.first_minute_rss_kib.is_none() && self.started.elapsed() >= FIRST_MINUTE {
            r.first_minute_rss_kib = Some(s.rss_kib);
        }
        *r
    }

    /// Samples every [`SAMPLE_EVERY`] until `done` is set, the child dies, or `until`.
    pub fn run(&self, done: &AtomicBool, until: Instant) {
        let mut next = Instant::now() + SAMPLE_EVERY;
        while !done.load(Ordering::Relaxed) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
            if Instant::now() >= next {
                next += SAMPLE_EVERY;
                if self.take().child_died {
                    return;
                }
            }
        }
    }
}
