"""Gradient compression for the wire (horovod.torch.compression), on hvd._compression."""
import torch

from hvd._compression import (Compressor, NoneCompressor, compression_namespace,  # noqa: F401
                              fp16_compressor)

FP16Compressor = fp16_compressor(lambda dtype: dtype.is_floating_point,
                                 lambda tensor, dtype: tensor.type(dtype), torch.float16)
Compression = compression_namespace(FP16Compressor)
