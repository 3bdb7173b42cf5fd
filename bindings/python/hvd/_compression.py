"""Gradient compression for the wire (Horovod's Compression), shared by the front-ends.

A Compressor's compress(tensor) returns the tensor the collective sends and a
context; decompress(result, context) turns the result back. NoneCompressor sends
tensors as they are; a front-end makes its float16 compressor with fp16_compressor
(floating tensors travel as float16 and come back in their own dtype, others pass
through) and its `Compression` namespace (Compression.none, Compression.fp16) with
compression_namespace."""


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


def fp16_compressor(is_float, cast, float16):
    """The FP16Compressor of a framework: is_float(dtype) says which dtypes compress,
    cast(tensor, dtype) converts, float16 is the framework's float16 dtype."""
    class FP16Compressor(Compressor):
        """Sends floating-point tensors as float16 and casts the result back to the
        original dtype; other dtypes pass through."""

        @staticmethod
        def compress(tensor):
            if is_float(tensor.dtype) and tensor.dtype != float16:
                return cast(tensor, float16), tensor.dtype
            return tensor, None

        @staticmethod
        def decompress(tensor, ctx):
            return tensor if ctx is None else cast(tensor, ctx)
    return FP16Compressor


def compression_namespace(fp16):
    """The `Compression` class of a front-end: Compression.none, Compression.fp16."""
    return type("Compression", (), {
        "__doc__": "The available compressors: Compression.none and Compression.fp16.",
        "none": NoneCompressor, "fp16": fp16})
