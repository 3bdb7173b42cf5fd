"""hvd.keras.elastic: hvd.tensorflow.keras.elastic."""
from hvd.tensorflow.keras.elastic import *  # noqa: F401,F403
