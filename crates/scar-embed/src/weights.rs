//! Reads a safetensors file one tensor at a time.
//!
//! candle's memory-mapped loader copies every tensor out of the mapping, and the mapped pages it
//! read stay resident until the mapping goes: loading BGE-large (1.3 GB) peaked at twice its
//! size. Reading each tensor into its own buffer keeps the peak at the weights plus one tensor.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use crate::{EmbedError, Result};

/// One entry of the JSON header.
#[derive(Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<usize>,
    /// Start and end in the data that follows the header.
    data_offsets: (usize, usize),
}

/// Every floating-point tensor of the file at `path`, converted to `dtype` on `device`. Others
/// (older checkpoints keep `position_ids` as I64) are not weights and are left out.
pub(crate) fn read(path: &Path, dtype: DType, device: &Device) -> Result<HashMap<String, Tensor>> {
    let unreadable = |source: Box<dyn std::error::Error + Send + Sync>| EmbedError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let io = |error: std::io::Error| unreadable(error.into());
    let mut file = fs_err::File::open(path).map_err(io)?;
    let mut length = [0u8; 8];
    file.read_exact(&mut length).map_err(io)?;
    let header_length = usize::try_from(u64::from_le_bytes(length))
        .ok()
        .filter(|&n| n <= 100 << 20)
        .ok_or_else(|| EmbedError::BadFile {
            path: path.to_owned(),
            reason: "not a safetensors file (header length)".into(),
        })?;
    let mut header = vec![0u8; header_length];
    file.read_exact(&mut header).map_err(io)?;
    let mut entries: HashMap<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| unreadable(e.into()))?;
    entries.remove("__metadata__");
    let mut entries = entries
        .into_iter()
        .map(|(name, value)| Ok((name, serde_json::from_value::<Entry>(value)?)))
        .collect::<Result<Vec<_>, serde_json::Error>>()
        .map_err(|e| unreadable(e.into()))?;
    // In file order, so that reading is sequential.
    entries.sort_by_key(|(_, entry)| entry.data_offsets.0);

    let data_start = 8 + header_length as u64;
    let mut tensors = HashMap::with_capacity(entries.len());
    let mut bytes = Vec::new();
    for (name, entry) in entries {
        let stored = match entry.dtype.as_str() {
            "F32" => DType::F32,
            "F16" => DType::F16,
            "BF16" => DType::BF16,
            _ => continue,
        };
        let (start, end) = entry.data_offsets;
        bytes.resize(end.saturating_sub(start), 0);
        file.seek(SeekFrom::Start(data_start + start as u64))
            .map_err(io)?;
        file.read_exact(&mut bytes).map_err(io)?;
        let tensor = Tensor::from_raw_buffer(&bytes, stored, &entry.shape, &Device::Cpu)
            .and_then(|t| t.to_dtype(dtype))
            .and_then(|t| t.to_device(device))
            .map_err(|source| EmbedError::BadTensor {
                path: path.to_owned(),
                name: name.clone(),
                source: Box::new(source),
            })?;
        tensors.insert(name, tensor);
    }
    Ok(tensors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_candle_writes_in_the_asked_type() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.safetensors");
        let a = Tensor::new(&[[1.5f32, -2.0], [0.25, 4.0]], &Device::Cpu).unwrap();
        let b = Tensor::new(&[7.0f32, 8.0, 9.0], &Device::Cpu).unwrap();
        let ids = Tensor::new(&[0i64, 1, 2], &Device::Cpu).unwrap();
        candle_core::safetensors::save(
            &HashMap::from([
                ("a".to_owned(), a.clone()),
                ("b.c".to_owned(), b.clone()),
                ("position_ids".to_owned(), ids),
            ]),
            &path,
        )
        .unwrap();
        let tensors = read(&path, DType::F16, &Device::Cpu).unwrap();
        assert_eq!(tensors.len(), 2);
        assert_eq!(tensors["a"].dtype(), DType::F16);
        let a_back: Vec<Vec<f32>> = tensors["a"]
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec2()
            .unwrap();
        assert_eq!(a_back, a.to_vec2::<f32>().unwrap());
        let b_back: Vec<f32> = tensors["b.c"]
            .to_dtype(DType::F32)
            .unwrap()
            .to_vec1()
            .unwrap();
        assert_eq!(b_back, b.to_vec1::<f32>().unwrap());

        std::fs::write(&path, b"not safetensors at all").unwrap();
        let error = read(&path, DType::F32, &Device::Cpu).unwrap_err();
        assert!(error.to_string().contains("model.safetensors"), "{error}");
    }
}
