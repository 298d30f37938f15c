//! An idle pool uses no CPU. Its own test binary: process CPU time (getrusage) must not include
//! other tests running in parallel.

use std::time::{Duration, Instant};

use ark_reactor::{IoModel, ReactorConfig, ReactorPool};

#[test]
fn an_idle_pool_uses_no_cpu() {
    let pool =
        ReactorPool::start(IoModel::Shared { threads: 4 }, ReactorConfig::default()).unwrap();
    let sharded =
        ReactorPool::start(IoModel::Sharded { reactors: 4 }, ReactorConfig::default()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let cpu_before = ark_testkit::process_cpu_seconds().expect("process CPU clock");
    let wall = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let cpu = ark_testkit::process_cpu_seconds().expect("process CPU clock") - cpu_before;
    let wall = wall.elapsed().as_secs_f64();
    assert!(
        cpu / wall < 0.01,
        "idle reactors used {:.2}% CPU",
        cpu / wall * 100.0
    );
    let turns = pool.stats().turns + sharded.stats().turns;
    assert!(turns <= 10, "idle reactors turned {turns} times");
    pool.stop().unwrap();
    sharded.stop().unwrap();
}
