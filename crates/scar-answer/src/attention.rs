//! Causal self-attention on the CPU, a block of queries at a time. Reading a prompt, attention
//! through candle's tensors wrote every head's whole square of scores several times over (the
//! product, the scale, the mask, the softmax with a scalar `exp`), half of it masked, and cost
//! about as much as every weight matrix together (docs/PERFORMANCE.md). Here each task takes
//! one head's next block of queries and only the keys they may see: `scale · Q·Kᵀ` in a
//! buffer of its own, the soft cap and a vectorised softmax on each row's visible keys, then
//! `P·V`. Keys and values are read where the cache keeps them (gemm takes any row stride), so
//! nothing is copied; query head `h` reads key-value head `h / (heads / key-value heads)`.
//! Decoding's one new position takes a kernel of its own (`decoding.rs`).

mod decoding;

use std::sync::Mutex;

use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use gemm::Parallelism;

use decoding::{OnePosition, Sizes};

/// Queries one task takes: for prompts of a few thousand tokens, their scores against every
/// key they may see stay in the core's cache.
const QUERY_BLOCK: usize = 32;

/// What a query sees: every earlier position and its own, and with `window` only the last
/// `window` of those.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Causal {
    /// Multiplies the scores.
    pub(crate) scale: f32,
    /// Scores are squashed to `cap · tanh(s / cap)` (Gemma 2), if set.
    pub(crate) softcap: Option<f32>,
    pub(crate) window: Option<usize>,
}

impl Causal {
    /// The first key that position `query` sees.
    fn first_key(self, query: usize) -> usize {
        self.window
            .map_or(0, |window| (query + 1).saturating_sub(window))
    }

    /// Applies the soft cap, if any, to a row of scores.
    fn soften(self, scores: &mut [f32]) {
        if let Some(cap) = self.softcap {
            for score in scores {
                *score = cap * (*score / cap).tanh();
            }
        }
    }
}

/// The attention (batch, heads, length, head dimension) of `q` over `k` and `v` (batch,
/// key-value heads, keys, head dimension), the queries being the last `length` positions of
/// the keys'. Each tensor's last dimension must be contiguous.
pub(crate) fn causal_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    causal: Causal,
) -> Result<Tensor> {
    q.apply_op3_no_bwd(k, v, &causal)
}

/// One tensor's f32 values and the strides of its first three dimensions.
struct Strided<'a> {
    values: &'a [f32],
    strides: [usize; 3],
}

impl<'a> Strided<'a> {
    fn new(storage: &'a CpuStorage, layout: &Layout) -> Result<Self> {
        let CpuStorage::F32(values) = storage else {
            candle_core::bail!("attention takes f32 values");
        };
        let &[batch, heads, rows, row_stride] = layout.stride() else {
            candle_core::bail!("attention takes four dimensions");
        };
        if row_stride != 1 {
            candle_core::bail!("attention reads rows whose values are adjacent");
        }
        // The last value the layout reaches must be inside the storage, so that every row
        // read below is too.
        let reach: usize = layout
            .dims()
            .iter()
            .zip(layout.stride())
            .map(|(&size, &stride)| size.saturating_sub(1) * stride)
            .sum();
        if layout.dims().contains(&0) || layout.start_offset() + reach >= values.len() {
            candle_core::bail!("attention over an empty or out-of-range tensor");
        }
        Ok(Self {
            values: &values[layout.start_offset()..],
            strides: [batch, heads, rows],
        })
    }

    /// Row `row` of head `head` of item `item`, and the rows after it.
    fn rows(&self, item: usize, head: usize, row: usize) -> &'a [f32] {
        let [batch, heads, rows] = self.strides;
        &self.values[item * batch + head * heads + row * rows..]
    }

    fn row_stride(&self) -> isize {
        isize::try_from(self.strides[2]).expect("a stride within a slice")
    }
}

impl CustomOp3 for Causal {
    fn name(&self) -> &'static str {
        "causal-attention"
    }

    fn cpu_fwd(
        &self,
        q_storage: &CpuStorage,
        q_layout: &Layout,
        k_storage: &CpuStorage,
        k_layout: &Layout,
        v_storage: &CpuStorage,
        v_layout: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (batch, heads, length, dim) = q_layout.shape().dims4()?;
        let (k_batch, kv_heads, keys, k_dim) = k_layout.shape().dims4()?;
        if k_layout.dims() != v_layout.dims()
            || k_batch != batch
            || k_dim != dim
            || kv_heads == 0
            || heads % kv_heads != 0
            || keys < length
        {
            candle_core::bail!(
                "queries {:?} cannot attend over keys {:?} and values {:?}",
                q_layout.dims(),
                k_layout.dims(),
                v_layout.dims()
            );
        }
        let (q, k, v) = (
            Strided::new(q_storage, q_layout)?,
            Strided::new(k_storage, k_layout)?,
            Strided::new(v_storage, v_layout)?,
        );
        if length == 1
            && let Some(kernel) = OnePosition::for_this_cpu(dim)
        {
            let sizes = Sizes {
                batch,
                heads,
                kv_heads,
                keys,
                dim,
            };
            let out = kernel.attend(*self, (&q, &k, &v), sizes);
            return Ok((CpuStorage::F32(out), Shape::from((batch, heads, 1, dim))));
        }
        let past = keys - length;
        let blocks = length.div_ceil(QUERY_BLOCK);
        let mut out = vec![0f32; batch * heads * length * dim];
        // Each task's rows of the output, in task order: (item, head, block).
        let parts: Vec<Mutex<&mut [f32]>> = out
            .chunks_mut(length * dim)
            .flat_map(|head| head.chunks_mut(QUERY_BLOCK * dim))
            .map(Mutex::new)
            .collect();
        candle_core::utils::barrier_pool().execute_chunked(parts.len(), |tasks| {
            for task in tasks {
                let (pair, block) = (task / blocks, task % blocks);
                let (item, head) = (pair / heads, pair % heads);
                let kv_head = head / (heads / kv_heads);
                let first = block * QUERY_BLOCK;
                let mut context = parts[task]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let block = QueryBlock {
                    queries: q.rows(item, head, first),
                    query_stride: q.row_stride(),
                    first_position: past + first,
                    rows: context.len() / dim,
                    dim,
                };
                block.attend(&k, &v, item, kv_head, *self, &mut context);
            }
        });
        Ok((
            CpuStorage::F32(out),
            Shape::from((batch, heads, length, dim)),
        ))
    }
}

/// One task's queries: `rows` rows of `dim` values, `query_stride` apart, at positions
/// `first_position` on.
struct QueryBlock<'a> {
    queries: &'a [f32],
    query_stride: isize,
    first_position: usize,
    rows: usize,
    dim: usize,
}

impl QueryBlock<'_> {
    /// Writes the block's attention over key-value head `kv_head` of `item` into `context`
    /// (`rows × dim`, row-major).
    fn attend(
        &self,
        k: &Strided<'_>,
        v: &Strided<'_>,
        item: usize,
        kv_head: usize,
        causal: Causal,
        context: &mut [f32],
    ) {
        let Self {
            queries,
            query_stride,
            first_position,
            rows,
            dim,
        } = *self;
        // The keys any of the block's queries sees.
        let first_key = causal.first_key(first_position);
        let seen = first_position + rows - first_key;
        let (keys, values) = (
            k.rows(item, kv_head, first_key),
            v.rows(item, kv_head, first_key),
        );
        let stride = |values: usize| isize::try_from(values).expect("a row within a slice");
        assert!(context.len() == rows * dim);
        // Every row read is whole: the queries' rows, and `seen` rows of keys and values, lie
        // within their tensors (checked by `Strided::new` and the callers' shapes).
        let scores = &mut vec![0f32; rows * seen];
        // SAFETY: query row i, value d is `queries[i · query_stride + d]`; key j's is
        // `keys[j · stride + d]`, for i < rows, j < seen, d < dim, all inside the tensors whose
        // shapes the op checked; `scores` is rows × seen, written row-major. gemm only reads
        // through the input pointers.
        #[allow(unsafe_code)]
        unsafe {
            gemm::gemm(
                rows,
                seen,
                dim,
                scores.as_mut_ptr(),
                1,
                stride(seen),
                false,
                queries.as_ptr(),
                1,
                query_stride,
                keys.as_ptr(),
                k.row_stride(),
                1,
                0.0,
                causal.scale,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
        for (i, row) in scores.chunks_exact_mut(seen).enumerate() {
            let position = first_position + i;
            let visible = causal.first_key(position) - first_key..position + 1 - first_key;
            row[..visible.start].fill(0.0);
            row[visible.end..].fill(0.0);
            let row = &mut row[visible];
            causal.soften(row);
            scar_embed::softmax_rows(row, row.len());
        }
        // SAFETY: probabilities are `scores[i · seen + j]`, values `values[j · stride + d]`
        // inside the tensor as above; `context` is rows × dim, written row-major.
        #[allow(unsafe_code)]
        unsafe {
            gemm::gemm(
                rows,
                dim,
                seen,
                context.as_mut_ptr(),
                1,
                stride(dim),
                false,
                scores.as_ptr(),
                1,
                stride(seen),
                values.as_ptr(),
                1,
                v.row_stride(),
                0.0,
                1.0,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
    }
}
