"""The type stubs shipped with the package (kiln/_kiln.pyi and kiln/py.typed) name every public attribute of
the extension module and of its classes, and nothing it lacks: a binding added or renamed fails here until
the stubs follow."""

import ast
from pathlib import Path

import kiln

PACKAGE = Path(kiln.__file__).parent


def stubs():
    """{name: the members its class body names (None for a function or a variable)} of _kiln.pyi's top level,
    less the Protocols and type aliases it defines for itself."""
    tree = ast.parse((PACKAGE / "_kiln.pyi").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            if any(isinstance(base, ast.Name) and base.id == "Protocol" for base in node.bases):
                continue
            members = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            out[node.name] = members
        elif isinstance(node, ast.FunctionDef):
            out[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            annotation = node.annotation
            if not (isinstance(annotation, ast.Name) and annotation.id == "TypeAlias"):
                out[node.target.id] = None
    return out


def public(names):
    return {name for name in names if not name.startswith("_")}


def test_the_package_ships_its_stubs():
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "_kiln.pyi").is_file()


def test_the_stubs_name_every_public_attribute_of_the_module():
    stubbed = stubs()
    module = public(vars(kiln._kiln))
    assert sorted(module - stubbed.keys()) == [], "bound but not in _kiln.pyi"
    assert sorted(stubbed.keys() - set(vars(kiln._kiln))) == [], "in _kiln.pyi but not bound"


def test_the_stubs_name_every_public_member_of_each_class():
    for name, members in stubs().items():
        bound = getattr(kiln._kiln, name)
        if members is None:
            assert not isinstance(bound, type), f"{name} is a class in the module, not in _kiln.pyi"
            continue
        assert isinstance(bound, type), f"{name} is a class in _kiln.pyi, not in the module"
        own = public(vars(bound)) | ({"__call__"} & set(vars(bound)))
        named = public(members) | ({"__call__"} & members)
        assert sorted(own - named) == [], f"kiln._kiln.{name}: bound but not in _kiln.pyi"
        assert sorted(named - own) == [], f"kiln._kiln.{name}: in _kiln.pyi but not bound"
        for private in members - named - {"__init__"}:
            assert hasattr(bound, private), f"kiln._kiln.{name}.{private}: in _kiln.pyi but not bound"


def test_the_package_reexports_what_the_stubs_call_public():
    # kiln's own names of the module's (kiln.Program, kiln.Error, ...) are the stubbed ones.
    for name in public(stubs()):
        assert getattr(kiln, name) is getattr(kiln._kiln, name)
