//! Policy time per query, without I/O: SCAR and the evidence walk against a static window on
//! 1,024-dim vectors.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use scar_core::{ChunkId, norm};
use scar_policy::{MemoryChunk, MemorySource, Options, Policy, Rankings, Seed, expand};

const DIMENSION: usize = 1024;
const DOCUMENTS: usize = 40;
const CHUNKS_PER_DOCUMENT: usize = 50;

/// `SplitMix64`: reproducible randomness without a dependency.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    fn unit_vector(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIMENSION).map(|_| self.unit()).collect();
        let length = norm(&v);
        v.into_iter().map(|x| x / length).collect()
    }
}

fn policy(c: &mut Criterion) {
    let mut random = Random(7);
    let mut source = MemorySource::new();
    for _ in 0..DOCUMENTS {
        source.add_document(
            (0..CHUNKS_PER_DOCUMENT).map(|_| MemoryChunk::new(random.unit_vector(), 200)),
        );
    }
    let query = random.unit_vector();
    let total = source.len() as u64;
    let mut group = c.benchmark_group("policy");
    for k in [5, 50] {
        let seeds: Vec<Seed> = (0..k)
            .map(|rank| Seed {
                id: ChunkId((random.next() % total) as u32),
                score: 1.0 / (rank + 1) as f32,
                judged: None,
            })
            .collect();
        // Rankings as deep as the retriever draws them, in a random order.
        let order = |random: &mut Random| -> Vec<ChunkId> {
            (0..100 * k)
                .map(|_| ChunkId((random.next() % total) as u32))
                .collect()
        };
        let rankings = Rankings::new(
            order(&mut random),
            order(&mut random),
            100 * k,
            source.len(),
        );
        for window in [1, 2] {
            for (name, policy) in [
                ("scar", Policy::scar(window)),
                ("evidence", Policy::evidence(window)),
                ("static", Policy::StaticWindow { window }),
            ] {
                let options = Options::new(policy).expect("valid policy");
                group.bench_function(format!("{name}/k={k}/w={window}"), |b| {
                    b.iter(|| {
                        expand(
                            &source,
                            black_box(&query),
                            black_box(&seeds),
                            &rankings,
                            &options,
                        )
                    });
                });
            }
        }
    }
    group.finish();
}

criterion_group!(benches, policy);
criterion_main!(benches);
