//! Each value is chosen against the defaults alone; two values for the same
//! collective can interact (a lower threshold makes a segment size moot, or
//! hands a size to a path the other value slows). So the values chosen for
//! one collective are measured once more, all together against the
//! defaults, over every size their sweeps covered, and dropped together
//! when the combination is slower anywhere.

use crate::plan::{Collective, Sizes, Sweep};
use crate::rule::Point;
use crate::runner::{run_sweep, Job, Launch};

/// The values chosen for one collective and the sizes to check them at.
#[derive(Clone, Debug, PartialEq)]
pub struct Combination {
    pub collective: Collective,
    /// full parameter names and values
    pub settings: Vec<(String, i64)>,
    pub sizes: Sizes,
}

impl Combination {
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self.settings.iter().map(|(n, v)| format!("{n} = {v}")).collect();
        parts.join(", ")
    }
}

/// Groups chosen values by collective; `chosen` holds each value with the
/// sweep it won. The sizes span every size of those sweeps, a factor 2
/// apart (barrier: none).
pub fn combinations(chosen: &[(&Sweep, i64)]) -> Vec<Combination> {
    let mut groups: Vec<Combination> = Vec::new();
    for (sweep, value) in chosen {
        let sizes = sweep.sizes.list();
        let (low, high) = (sizes.iter().copied().min().unwrap_or(0), sizes.iter().copied().max().unwrap_or(0));
        let setting = (sweep.full_name(), *value);
        match groups.iter_mut().find(|g| g.collective == sweep.collective) {
            Some(g) => {
                g.settings.push(setting);
                g.sizes.min = g.sizes.min.min(low);
                g.sizes.max = g.sizes.max.max(high);
            }
            None => groups.push(Combination {
                collective: sweep.collective,
                settings: vec![setting],
                sizes: Sizes { min: low, max: high, factor: 2 },
            }),
        }
    }
    groups
}

/// Measures `combination` against the defaults at `np`: its points, and
/// the default's second job (the last) against its first, the control.
pub fn measure(launch: &Launch, np: usize, combination: &Combination) -> Result<(Vec<Point>, Vec<Point>), String> {
    let sweep = Sweep {
        param: "together",
        collective: combination.collective,
        sizes: combination.sizes,
        candidates: vec![],
    };
    let tag = format!("together-{}", combination.collective.name());
    let jobs = [
        Job { name: "default".into(), mca: vec![] },
        Job {
            name: tag,
            mca: combination.settings.iter().map(|(n, v)| (n.clone(), v.to_string())).collect(),
        },
        Job { name: "default-again".into(), mca: vec![] },
    ];
    let run = run_sweep(launch, np, &sweep, &jobs)?;
    let points = |job| {
        combination
            .sizes
            .list()
            .into_iter()
            .filter_map(|size| Some(Point { np, size, comparison: run.samples.compare(0, job, size, crate::FLOOR_DRIFT)? }))
            .collect::<Vec<Point>>()
    };
    Ok((points(1), points(2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(param: &'static str, collective: Collective, min: u64, max: u64, factor: u64) -> Sweep {
        Sweep { param, collective, sizes: Sizes { min, max, factor }, candidates: vec![] }
    }

    #[test]
    fn values_of_one_collective_are_checked_together_over_all_their_sizes() {
        let a = sweep("allreduce_exchange_max", Collective::Allreduce, 16, 4096, 4);
        let b = sweep("bcast_slot_size", Collective::Bcast, 2048, 32768, 4);
        let c = sweep("allreduce_parallel_min_bytes", Collective::Allreduce, 4096, 65536, 2);
        let groups = combinations(&[(&a, 0), (&b, 8192), (&c, 8192)]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].collective, Collective::Allreduce);
        assert_eq!(groups[0].sizes, Sizes { min: 16, max: 65536, factor: 2 });
        assert_eq!(
            groups[0].describe(),
            "coll_rdma_allreduce_exchange_max = 0, coll_rdma_allreduce_parallel_min_bytes = 8192"
        );
        assert_eq!(groups[1].settings, vec![("coll_rdma_bcast_slot_size".to_string(), 8192)]);
    }
}
