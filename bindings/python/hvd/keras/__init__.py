"""hvd.keras: Horovod's horovod.keras, the same as hvd.tensorflow.keras (Keras runs on
TensorFlow here: Keras 3 with its TensorFlow backend, or tf-keras with
TF_USE_LEGACY_KERAS=1)."""
from hvd.tensorflow.keras import *  # noqa: F401,F403
from hvd.tensorflow.keras import __all__  # noqa: F401
from hvd.tensorflow.keras import callbacks, elastic  # noqa: F401
