"""hvd.keras.callbacks: hvd.tensorflow.keras.callbacks."""
from hvd.tensorflow.keras.callbacks import *  # noqa: F401,F403
from hvd.tensorflow.keras.callbacks import (BestModelCheckpoint,  # noqa: F401
                                            BroadcastGlobalVariablesCallback,
                                            LearningRateScheduleCallback,
                                            LearningRateWarmupCallback, MetricAverageCallback)
