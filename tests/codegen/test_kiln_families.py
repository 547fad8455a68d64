"""kiln's open families (kiln.exclusive_scan, kiln.inclusive_scan, kiln.merge_sort_pairs, kiln.reduce,
kiln.segmented_reduce, kiln.select_if, kiln.transform, kiln.unique_by_key): a row expands into the kernels the family
declares, and a mistake names the file, the row and the field. kiln's own primitives' families (prim.*) are
declarations too, most of them extending an open family."""

import textwrap
import tomllib
import unittest
from pathlib import Path

from table_case import TableCase  # puts codegen/ on the path
import errors  # noqa: E402
import kiln_families  # noqa: E402
import spec as specmod  # noqa: E402
import unit_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

HEADER = '[registry]\nname = "t"\n'
SCAN = "kiln_prim::exclusive_scan<float, ::cuda::maximum<>, void>"  # In = void: the input is const T*


class KilnFamilies(TableCase):
    def test_exclusive_scan_row_expands_into_its_two_kernels(self):
        s = self.load(HEADER + '[[unit]]\nname = "scan_max_f32"\nfamily = "kiln.exclusive_scan"\n'
                               'params = { T = "float", Op = "::cuda::maximum<>" }\n')
        unit = s.units[0]
        self.assertEqual([k.name for k in unit.kernels], ["scan_max_f32_init", "scan_max_f32_sweep"])
        init, sweep = (k.expression for k in unit.kernels)
        self.assertEqual(init, f"cub::detail::scan::DeviceScanInitKernel<{SCAN}::tile_state>")
        members = ", ".join(f"{SCAN}::{m}" for m in ("max_policy", "input_t", "output_t", "tile_state", "op_t",
                                                     "init_t", "offset_t", "accum_t"))
        self.assertEqual(sweep, f"cub::detail::scan::DeviceScanKernel<{members}, false>")
        self.assertIn(ROOT / "primitives" / "device", unit.include_dirs)
        self.assertEqual(unit.params, {"Header": "", "In": "void", "Op": "::cuda::maximum<>", "T": "float"})
        self.assertEqual(unit.family_declaration, ROOT / "templates" / "families" / "kiln" / "exclusive_scan.toml")

    def test_reduce_and_inclusive_scan_rows(self):
        s = self.load(HEADER + textwrap.dedent('''\
            [[unit]]
            name = "max_by_a"
            family = "kiln.reduce"
            params = { T = "geo::Tagged", Op = "geo::MaxByA", Header = "geo/tagged.cuh" }

            [[unit]]
            name = "running_max"
            family = "kiln.inclusive_scan"
            params = { T = "int", Op = "::cuda::maximum<>" }
            '''))
        reduce, scan = s.units
        self.assertEqual([k.name for k in reduce.kernels], ["max_by_a_single_tile", "max_by_a_sweep", "max_by_a_final"])
        self.assertTrue(all("kiln_prim::reduce<geo::Tagged, geo::MaxByA, void>::" in k.expression for k in reduce.kernels))
        self.assertIn("partials_t", reduce.kernels[2].expression)
        self.assertEqual([k.name for k in scan.kernels], ["running_max_init", "running_max_sweep"])
        self.assertIn("kiln_prim::inclusive_scan<int, ::cuda::maximum<>, void>::init_t", scan.kernels[1].expression)
        text = unit_source.unit_body(s, reduce)
        self.assertIn("#include <kiln_prim/reduce.cuh>", text)
        self.assertIn("#include <geo/tagged.cuh>", text)
        self.assertNotIn("#include <", unit_source.unit_body(s, scan).replace("#include <kiln_prim/scan.cuh>", ""))

    def test_lazy_input_merge_sort_and_select_rows(self):
        s = self.load(HEADER + textwrap.dedent('''\
            [[unit]]
            name = "count_scan"
            family = "kiln.exclusive_scan"
            params = { T = "long long", Op = "::cuda::std::plus<>", In = "kiln_prim::counting_iterator<long long>" }

            [[unit]]
            name = "sort_desc"
            family = "kiln.merge_sort_pairs"
            params = { K = "float", V = "int", Compare = "::cuda::std::greater<>" }

            [[unit]]
            name = "positive"
            family = "kiln.select_if"
            params = { T = "double", Pred = "geo::Positive", Header = "geo/lazy.cuh" }
            '''))
        scan, sort, select = s.units
        self.assertTrue(all("kiln_prim::exclusive_scan<long long, ::cuda::std::plus<>, "
                            "kiln_prim::counting_iterator<long long>>::" in k.expression for k in scan.kernels))
        self.assertEqual([k.name for k in sort.kernels], ["sort_desc_block_sort", "sort_desc_partition", "sort_desc_merge"])
        self.assertTrue(all("kiln_prim::merge_sort_pairs<float, int, ::cuda::std::greater<>, void, void>::" in k.expression
                            for k in sort.kernels))
        self.assertIn("#include <kiln_prim/merge_sort.cuh>", unit_source.unit_body(s, sort))
        self.assertEqual([k.name for k in select.kernels], ["positive_init", "positive_sweep"])
        self.assertIn("kiln_prim::select_if<double, geo::Positive, void>::select_op_t", select.kernels[1].expression)
        self.assertIn("#include <geo/lazy.cuh>", unit_source.unit_body(s, select))

    def test_transform_row(self):
        s = self.load(HEADER + textwrap.dedent('''
            [[unit]]
            name = "halve"
            family = "kiln.transform"
            params = { T = "float", R = "double", Op = "geo::Half", Header = "geo/lazy.cuh" }
            '''))
        unit = s.units[0]
        self.assertEqual([k.name for k in unit.kernels], ["halve_kernel"])
        self.assertTrue(unit.kernels[0].expression.startswith("cub::detail::transform::transform_kernel<"
                                                               "kiln_prim::transform<float, double, geo::Half, void>::max_policy"))
        self.assertIn("#include <kiln_prim/transform.cuh>", unit_source.unit_body(s, unit))
        self.assertIn("#include <geo/lazy.cuh>", unit_source.unit_body(s, unit))

    def test_lazy_inputs_of_the_other_families(self):
        s = self.load(HEADER + textwrap.dedent('''
            [[unit]]
            name = "argsort"
            family = "kiln.merge_sort_pairs"
            params = { K = "float", V = "int", Compare = "::cuda::std::less<>", ValuesIn = "kiln_prim::counting_iterator<int>" }

            [[unit]]
            name = "starts"
            family = "kiln.unique_by_key"
            params = { K = "int", V = "int", Equal = "::cuda::std::equal_to<>", KeysIn = "kiln_prim::constant_iterator<int>" }

            [[unit]]
            name = "squares"
            family = "kiln.segmented_reduce"
            params = { T = "double", Op = "::cuda::std::plus<>", In = "kiln_prim::counting_iterator<double>" }

            [[unit]]
            name = "thirds"
            family = "kiln.select_if"
            params = { T = "long long", Pred = "geo::Third", In = "kiln_prim::counting_iterator<long long>", Header = "geo/lazy.cuh" }

            [[unit]]
            name = "products"
            family = "kiln.transform"
            params = { T = "kiln_prim::pair<float, float>", R = "double", Op = "geo::Product", In = "kiln_prim::zip_iterator<const float*, const float*>", Header = "geo/lazy.cuh" }
            '''))
        argsort, starts, squares, thirds, products = s.units
        self.assertEqual(argsort.params["KeysIn"], "void")
        self.assertTrue(all("kiln_prim::merge_sort_pairs<float, int, ::cuda::std::less<>, void, "
                            "kiln_prim::counting_iterator<int>>::" in k.expression for k in argsort.kernels))
        self.assertTrue(all("kiln_prim::unique_by_key<int, int, ::cuda::std::equal_to<>, "
                            "kiln_prim::constant_iterator<int>, void>::" in k.expression for k in starts.kernels))
        self.assertIn("kiln_prim::segmented_reduce<double, ::cuda::std::plus<>, kiln_prim::counting_iterator<double>>::input_t",
                      squares.kernels[0].expression)
        self.assertIn("kiln_prim::select_if<long long, geo::Third, kiln_prim::counting_iterator<long long>>::input_t",
                      thirds.kernels[1].expression)
        self.assertIn("kiln_prim::transform<kiln_prim::pair<float, float>, double, geo::Product, "
                      "kiln_prim::zip_iterator<const float*, const float*>>::input_t", products.kernels[0].expression)

    def test_prim_family_is_the_open_family_with_kilns_operator(self):
        s = self.load(HEADER + textwrap.dedent('''\
            [[unit]]
            name = "sum_i32"
            family = "prim.exclusive_scan"
            params = { T = "int" }

            [[unit]]
            name = "scan_i32"
            family = "kiln.exclusive_scan"
            params = { T = "int", Op = "::cuda::std::plus<>" }
            '''))
        prim, open_ = s.units
        self.assertEqual([k.name for k in prim.kernels], ["sum_i32_init", "sum_i32_sweep"])
        self.assertEqual([k.expression for k in prim.kernels], [k.expression for k in open_.kernels])
        self.assertEqual(prim.params, open_.params)
        self.assertEqual(prim.include_dirs, open_.include_dirs)
        self.assertEqual(prim.family_path, ROOT / "templates" / "families" / "prim" / "kernels.cu.j2")
        self.assertEqual(unit_source.unit_body(s, prim).strip(), "#include <kiln_prim/kernels.cuh>")

    def test_prim_family_of_its_own_kernels_and_defaults(self):
        s = self.load(HEADER + textwrap.dedent('''\
            [[unit]]
            name = "lb"
            family = "prim.search"
            params = { Bound = "lower_bound", T = "int" }

            [[unit]]
            name = "u"
            family = "prim.unique_by_key"
            params = { K = "int" }
            '''))
        search, unique = s.units
        self.assertEqual([k.name for k in search.kernels], ["lb_for_each"])
        self.assertIn("kiln_prim::lower_bound<int>::op_t", search.kernels[0].expression)
        self.assertEqual(unique.params["Equal"], "::cuda::std::equal_to<>")
        self.assertEqual(unique.params["V"], "int")
        self.refused(HEADER + '[[unit]]\nname = "s"\nfamily = "prim.search"\nparams = { Bound = "lb", T = "int" }\n',
                     "field 'params'", "parameter 'Bound'", "does not match")
        self.refused(HEADER + '[[unit]]\nname = "s"\nfamily = "prim.sort"\n',
                     "field 'family'", "unknown family 'prim.sort'", "the 'prim.' prefix is kiln's own", "prim.search")

    def test_every_primitives_row_names_a_declared_family_and_no_kernels(self):
        table = ROOT / "kernels" / "primitives.toml"
        rows = tomllib.loads(table.read_text())["unit"]
        self.assertTrue(all("kernels" not in r and kiln_families.is_kiln(r["family"]) for r in rows))
        units = specmod.load(table, self.ARCHS, embed_ptx=False).units
        prim = [u for u in units if u.family.startswith("prim.")]
        self.assertEqual(len(prim), 27)
        self.assertEqual({u.family_path.name for u in prim}, {"kernels.cu.j2"})

    def test_declaration_mistakes_name_the_file(self):
        (self.root / "t.cu.j2").write_text("")
        for text, fragment in (('extends = "kiln.nope"\n', "extends 'kiln.nope'"),
                               ('extends = "kiln.reduce"\n[kernels]\nk = "x"\n', "whose kernels it takes"),
                               ('template = "missing.cu.j2"\n[kernels]\nk = "x"\n', "no template missing.cu.j2")):
            (self.root / "t.toml").write_text(text)
            with self.assertRaises(errors.GenError) as ctx:
                kiln_families.load(self.root / "t.toml")
            self.assertIn(str(self.root / "t.toml"), str(ctx.exception))
            self.assertIn(fragment, str(ctx.exception))

    def test_missing_param_names_file_row_and_field(self):
        self.refused(HEADER + '[[unit]]\nname = "scan"\nfamily = "kiln.exclusive_scan"\nparams = { T = "float" }\n',
                   "table.toml:3: unit #1 'scan': field 'params': family 'kiln.exclusive_scan' needs Op")

    def test_unknown_kiln_family(self):
        self.refused(HEADER + '[[unit]]\nname = "s"\nfamily = "kiln.sort"\nparams = { T = "int" }\n',
                   "unit #1 's'", "field 'family'", "unknown family 'kiln.sort'",
                   "kiln.exclusive_scan, kiln.inclusive_scan, kiln.merge_sort_pairs, kiln.reduce, "
                   "kiln.segmented_reduce, kiln.select_if, kiln.transform, kiln.unique_by_key")

    def test_kiln_prefix_is_not_searched_in_a_tables_template_dirs(self):
        (self.root / "fam").mkdir()
        (self.root / "fam" / "mine.cu.j2").write_text("// {{ T }}\n")
        self.refused('[registry]\nname = "t"\ntemplate_dirs = ["fam"]\n[[unit]]\nname = "s"\nfamily = "kiln.mine"\n',
                   "field 'family'", "unknown family 'kiln.mine'", "the 'kiln.' prefix is kiln's own")

    def test_row_kernels_are_refused(self):
        self.refused(HEADER + '[[unit]]\nname = "r"\nfamily = "kiln.reduce"\nparams = { T = "int", Op = "P" }\n'
                            'kernels = ["k"]\n',
                   "unit #1 'r'", "field 'kernels'", "declares its kernels (r_single_tile, r_sweep, r_final)")

    def test_param_checks(self):
        self.refused(HEADER + '[[unit]]\nname = "r"\nfamily = "kiln.reduce"\nparams = { T = 3, Op = "P" }\n',
                   "field 'params'", "parameter 'T' must be a C++ type as a string")
        self.refused(HEADER + '[[unit]]\nname = "r"\nfamily = "kiln.reduce"\n'
                            'params = { T = "int", Op = "P", Header = "a>\\n#define x" }\n',
                   "field 'params'", "parameter 'Header'", "does not match")
        self.refused(HEADER + '[[unit]]\nname = "r"\nfamily = "kiln.reduce"\nparams = { T = "int", Op = "P", N = "1" }\n',
                   "field 'params'", "parameter 'N' is not allowed")


if __name__ == "__main__":
    unittest.main()
