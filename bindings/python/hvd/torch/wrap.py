"""Auto-wrap policies for FullyShardedDataParallel: which submodules become units.

A *unit* is a set of parameters that is flattened, sharded, gathered and
reduce-scattered together (torch FSDP's FlatParameter, DeepSpeed ZeRO-3's
module-level fetch). The root module is always a unit; a policy picks the
submodules that become units of their own. A policy has torch FSDP's signature

    policy(module, recurse, nonwrapped_numel) -> bool

called positionally (so the policies written for torch 1.13's `unwrapped_params`
keyword and 2.x's `nonwrapped_numel` both work): with recurse=True it says whether
to look inside `module` for units; with recurse=False whether `module` itself
becomes a unit, `nonwrapped_numel` being the number of its parameters not already
in a unit below it. Use functools.partial to set the keyword arguments:

    functools.partial(size_based_auto_wrap_policy, min_num_params=100_000)
    functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    ModuleWrapPolicy({torch.nn.Linear})          # or just the set {torch.nn.Linear}

assign_units() applies a policy to a module tree without changing it: a pure
function of the module tree, tested on its own (tests/test_fsdp.py).
"""
import collections

import torch


def always_wrap_policy(module, recurse, nonwrapped_numel):
    """Every submodule with parameters of its own becomes a unit."""
    return True


def size_based_auto_wrap_policy(module, recurse, nonwrapped_numel, min_num_params=int(1e8),
                                force_leaf_modules=None, exclude_wrap_modules=None):
    """torch FSDP's: a module becomes a unit once it has at least `min_num_params`
    parameters not in a unit below it; ModuleList/ModuleDict are never units, and
    MultiheadAttention is not looked inside."""
    force_leaf = (size_based_auto_wrap_policy.FORCE_LEAF_MODULES
                  if force_leaf_modules is None else force_leaf_modules)
    exclude = (size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES
               if exclude_wrap_modules is None else exclude_wrap_modules)
    is_large = nonwrapped_numel >= min_num_params
    if recurse:
        return is_large and not isinstance(module, tuple(force_leaf))
    return is_large and not isinstance(module, tuple(exclude))


size_based_auto_wrap_policy.EXCLUDE_WRAP_MODULES = {torch.nn.ModuleList, torch.nn.ModuleDict}
size_based_auto_wrap_policy.FORCE_LEAF_MODULES = {torch.nn.MultiheadAttention}


def transformer_auto_wrap_policy(module, recurse, nonwrapped_numel, transformer_layer_cls):
    """torch FSDP's: every instance of one of `transformer_layer_cls` becomes a unit."""
    if recurse:
        return True
    return isinstance(module, tuple(transformer_layer_cls))


class ModuleWrapPolicy:
    """Every instance of one of `module_classes` becomes a unit (torch FSDP 2.x's)."""

    def __init__(self, module_classes):
        self.module_classes = tuple(module_classes)

    def __call__(self, module, recurse, nonwrapped_numel):
        return True if recurse else isinstance(module, self.module_classes)

    def __repr__(self):
        return "ModuleWrapPolicy(%s)" % ", ".join(c.__name__ for c in self.module_classes)


def as_policy(policy):
    """A policy callable from None (no units but the root), a set/list/tuple of
    module classes (ModuleWrapPolicy) or a policy callable."""
    if policy is None:
        return lambda module, recurse, nonwrapped_numel: False
    if isinstance(policy, (set, frozenset, list, tuple)):
        return ModuleWrapPolicy(policy)
    if not callable(policy):
        raise TypeError("auto_wrap_policy must be None, a set of module classes or a callable "
                        "policy(module, recurse, nonwrapped_numel), got %r" % (policy,))
    return policy


ParamSpec = collections.namedtuple("ParamSpec", "fqn param owners")
ParamSpec.__doc__ = """One distinct parameter of a unit: its name in the root module's
state_dict (the first name it was found under), the Parameter, and every (module,
attribute name) that refers to it (several when weights are tied within the unit)."""

UnitSpec = collections.namedtuple("UnitSpec", "name module params")
UnitSpec.__doc__ = """One unit: the module's name in the root ("" for the root), the
module, and its ParamSpecs in module pre-order, then attribute order."""


def _distinct_numel(module):
    seen, total = set(), 0
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            total += p.numel()
    return total


def assign_units(root, policy=None):
    """The units of `root` under `policy`, without changing anything.

    Contract:
      - result[0] is the root unit (name ""); the other units follow in module
        pre-order (named_modules() order), which is the forward order of a model
        that calls its children in registration order;
      - which modules are units follows torch FSDP's recursive wrap: a module is
        looked inside when policy(module, True, numel) holds, and after its children
        it becomes a unit when policy(module, False, remainder) holds, remainder
        being its parameters not in a unit below it;
      - every distinct Parameter of root (by identity) is in exactly one unit, that
        of the innermost unit module enclosing the first module (in pre-order) that
        holds it; its other holders are listed as owners when they belong to the
        same unit;
      - a Parameter held by modules of two different units raises ValueError naming
        both (tied weights must share a unit: wrap their common parent instead);
      - units other than the root with no parameters of their own are left out
        (the root unit is always there, possibly empty).
    """
    policy = as_policy(policy)
    unit_ids = set()

    def visit(module, is_root):
        numel = _distinct_numel(module)
        if not policy(module, True, numel):
            return 0
        wrapped = sum(visit(child, False) for _, child in module.named_children())
        if not is_root and policy(module, False, numel - wrapped):
            unit_ids.add(id(module))
            return numel
        return wrapped

    if not isinstance(root, torch.nn.Module):
        raise TypeError("FullyShardedDataParallel wraps a torch.nn.Module, got %s"
                        % type(root).__name__)
    visit(root, True)

    units = [UnitSpec("", root, [])]
    unit_of_module = {id(root): units[0]}
    # named_modules yields parents before children, so each module's enclosing unit
    # is known when it is reached.
    parents = {}
    for name, module in root.named_modules():
        for child_name, child in module.named_children():
            parents.setdefault(id(child), (module, name + "." + child_name if name else child_name))
        if module is root:
            continue
        if id(module) in unit_ids:
            unit = UnitSpec(name, module, [])
            units.append(unit)
        else:
            parent = parents[id(module)][0]
            unit = unit_of_module[id(parent)]
        unit_of_module[id(module)] = unit

    assigned = {}  # id(param) -> (unit, ParamSpec)
    for name, module in root.named_modules(remove_duplicate=False):
        unit = unit_of_module[id(module)]
        for attr, p in module._parameters.items():
            if p is None:
                continue
            fqn = name + "." + attr if name else attr
            if id(p) in assigned:
                other_unit, spec = assigned[id(p)]
                if other_unit is not unit:
                    raise ValueError(
                        "parameter %r is shared by unit %r and unit %r (as %r): tied weights must "
                        "be in one unit, so wrap a module that contains both"
                        % (spec.fqn, other_unit.name or "<root>", unit.name or "<root>", fqn))
                if (module, attr) not in [(m, a) for m, a in spec.owners]:
                    spec.owners.append((module, attr))
                continue
            spec = ParamSpec(fqn, p, [(module, attr)])
            unit.params.append(spec)
            assigned[id(p)] = (unit, spec)
    return [units[0]] + [u for u in units[1:] if u.params]
