"""Gradient compression for the wire (horovod.tensorflow.compression)."""
import tensorflow as tf


class Compressor:
    """compress(tensor) -> (tensor for the wire, context); decompress(tensor, context)."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16 and casts the result back to the
    original dtype; other dtypes pass through."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating:
            return tf.cast(tensor, dtype=tf.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and ctx.is_floating and tensor.dtype != ctx:
            return tf.cast(tensor, dtype=ctx)
        return tensor


class Compression:
    """The available compressors: Compression.none and Compression.fp16."""
    none = NoneCompressor
    fp16 = FP16Compressor
