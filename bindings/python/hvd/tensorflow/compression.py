"""Gradient compression for the wire (horovod.tensorflow.compression), on
hvd._compression."""
import tensorflow as tf

from hvd._compression import (Compressor, NoneCompressor, compression_namespace,  # noqa: F401
                              fp16_compressor)

FP16Compressor = fp16_compressor(lambda dtype: dtype.is_floating,
                                 lambda tensor, dtype: tf.cast(tensor, dtype=dtype), tf.float16)
Compression = compression_namespace(FP16Compressor)
