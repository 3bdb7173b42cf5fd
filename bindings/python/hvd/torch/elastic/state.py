"""TorchState: an elastic State holding PyTorch models, optimizers and ElasticSamplers
(each kept by a handler: a copy of its state_dict in host memory, restored on
failure and broadcast from rank 0 on sync) and plain Python objects as attributes."""

import copy

import torch

from hvd import basics
from hvd.elastic import ObjectState
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters


class StateHandler(object):
    def __init__(self, value):
        self.value = value
        self._saved = copy.deepcopy(self.value.state_dict())

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)

    def set_value(self, value):
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateHandler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(StateHandler):
    def sync(self):
        # Rank 0's progress through the epoch, split among the workers there are now.
        self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank=0))


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _split(kwargs):
    handlers, rest = {}, {}
    for name, value in kwargs.items():
        for kind, handler_cls in _handler_registry:
            if isinstance(value, kind):
                handlers[name] = handler_cls(value)
                break
        else:
            rest[name] = value
    return handlers, rest


class TorchState(ObjectState):
    """Args:
      model, optimizer: optional; kept by handlers.
      kwargs: more models, optimizers or ElasticSamplers (kept by handlers), and plain
        objects (epoch=0, batch=0), all exposed as attributes.
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, rest = _split({k: v for k, v in kwargs.items() if v is not None})
        self._handlers = handlers
        for name, handler in handlers.items():
            setattr(self, name, handler.value)
        for name in ("model", "optimizer"):
            if kwargs.get(name) is None:
                rest[name] = None
        super(TorchState, self).__init__(bcast_object=broadcast_object, get_rank=basics.rank,
                                         **rest)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super(TorchState, self).save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super(TorchState, self).restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super(TorchState, self).sync()

    def reset(self):
        # The samplers split what remains among the new workers before they sync.
        for handler in self._handlers.values():
            if isinstance(handler, SamplerStateHandler):
                handler.value.reset()

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers")
        if handlers is not None and name in handlers:
            handlers[name].set_value(value)
        super().__setattr__(name, value)
