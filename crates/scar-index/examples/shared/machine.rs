//! What the examples print beside their figures: the machine they were measured on (Linux).

/// The CPU's model name, as /proc/cpuinfo gives it.
pub fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map_or("unknown", |rest| rest.trim_start_matches([' ', '\t', ':']))
        .to_string()
}

/// The 1-, 5- and 15-minute load averages, as /proc/loadavg gives them.
pub fn load_average() -> String {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    loadavg
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
