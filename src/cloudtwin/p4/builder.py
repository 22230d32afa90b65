"""Assembling the checked declarations into a `Program`, the front end's second half: the
metadata and header instances (structs flattened, header stacks and unions), the package
`main` instantiates (PNA, v1model, PSA), the roles of the blocks' parameters and the
deparsers' emit order."""

from __future__ import annotations

from lark import Tree

from cloudtwin.p4.declarations import (
    ARCH_TYPES,
    ARCHITECTURES,
    ERROR_BITS,
    MAX_STRUCT_FIELDS,
    MAX_STRUCT_NESTING,
    PSA_ROLES,
    DeclarationChecker,
    params_of,
)
from cloudtwin.p4.program import Control, Extern, HeaderType, ParserBlock, Program

__all__ = ["Checker"]


class Checker(DeclarationChecker):
    """Walks the parse tree, building the Program and raising at the first unsupported construct."""

    def struct_fields(
        self, struct: str, prefix: str, node: Tree, chain: tuple[str, ...] = ()
    ) -> dict[str, int]:
        """The bit fields of `struct`, flattened (`prefix.inner.field`); P4Error when a struct
        contains itself, nests too deep or flattens to too many fields."""
        out: dict[str, int] = {}
        if struct not in self.structs:
            raise self.fail(node, f"{prefix}: type {struct!r} is not a declared struct")
        if struct in chain:
            raise self.fail(node, f"struct {struct} contains itself ({' -> '.join([*chain, struct])})")
        if len(chain) >= MAX_STRUCT_NESTING:
            raise self.fail(node, f"{prefix}: structs nested more than {MAX_STRUCT_NESTING} deep")
        for fname, type_ in self.structs[struct]:
            if type_.data == "named_type" and str(type_.children[0]) in self.structs:
                inner = (str(type_.children[0]), f"{prefix}.{fname}", node, (*chain, struct))
                out.update(self.struct_fields(*inner))
            elif type_.data == "named_type" and str(type_.children[0]) in self.headers:
                self.meta_headers[f"{prefix}.{fname}"] = self.headers[str(type_.children[0])]
            else:
                out[f"{prefix}.{fname}"] = self.width(type_, f"{struct}.{fname}", signed_ok=True)
                if self.is_signed(type_):
                    self.signed.add(f"{prefix}.{fname}")
            if len(out) > MAX_STRUCT_FIELDS:
                raise self.fail(node, f"{prefix}: more than {MAX_STRUCT_FIELDS:,} fields once flattened")
        return out

    def header_instances(self, struct: str, node: Tree, prefix: str = "hdr") -> dict[str, HeaderType]:
        if struct not in self.structs:
            raise self.fail(node, f"parser: headers type {struct!r} is not a declared struct")
        out = {}
        for fname, type_ in self.structs[struct]:
            tname = str(type_.children[0]) if type_.data == "named_type" else ""
            size = self.stack_sizes.get(struct, {}).get(fname)
            if size is not None and tname in self.unions:  # a stack of unions: by constant index only
                for i in range(size):
                    group = []
                    for member, htype in self.unions[tname]:
                        out[f"{prefix}.{fname}[{i}].{member}"] = self.headers[htype]
                        group.append(f"{prefix}.{fname}[{i}].{member}")
                    self.union_groups[f"{prefix}.{fname}[{i}]"] = group
                self.union_stacks[f"{prefix}.{fname}"] = size
                continue
            if size is not None:
                if tname not in self.headers:
                    what = "only stacks of headers or unions are supported"
                    raise self.fail(type_, f"{struct}.{fname}: {what}")
                for i in range(size):
                    out[f"{prefix}.{fname}[{i}]"] = self.headers[tname]
                self.stacks[f"{prefix}.{fname}"] = (self.headers[tname], size)
                continue
            if tname in self.unions:
                group = []
                for member, htype in self.unions[tname]:
                    out[f"{prefix}.{fname}.{member}"] = self.headers[htype]
                    group.append(f"{prefix}.{fname}.{member}")
                self.union_groups[f"{prefix}.{fname}"] = group
                continue
            if tname in self.structs and tname != struct and prefix.count(".") < MAX_STRUCT_NESTING:
                out.update(self.header_instances(tname, node, f"{prefix}.{fname}"))
                continue
            if tname not in self.headers:
                raise self.fail(type_, f"{struct}.{fname}: only headers may be members of the headers struct")
            out[f"{prefix}.{fname}"] = self.headers[tname]
        return out

    def build(self, tree: Tree) -> Program:
        for node in tree.children:
            self.declaration(node)
        self.refuse_annotations(tree)
        if self.main is None:
            packages = "`PNA_NIC(...) main;`, `V1Switch(...) main;` or `PSA_Switch(...) main;`"
            raise self.fail(tree, f"no {packages}")
        package = str(self.main.children[0])
        if package == "PSA_Switch":
            return self.build_psa()
        roles = ARCHITECTURES[package]
        if self.registers and package != "V1Switch":
            kind = str(self.registers[0].children[0])
            raise self.fail(self.registers[0], f"extern {kind}: only Counter and Meter are supported")
        global_externs = self.global_registers() if package == "V1Switch" else {}
        blocks = [
            str(inst.children[0])
            for inst in self.main.children[1:-1]
            if isinstance(inst, Tree) and inst.data == "instance"
        ]
        if len(blocks) != len(roles):
            raise self.fail(self.main, f"{package} takes ({', '.join(roles)}) in this subset")
        parser = next((p for p in self.parsers if p.name == blocks[0]), None)
        controls = {c.name: (c, params) for c, params in self.controls}
        if parser is None:
            raise self.fail(self.main, f"no parser named {blocks[0]!r}")
        for name in blocks[1:]:
            if name not in controls:
                raise self.fail(self.main, f"no control named {name!r}")
        if blocks[1:].count(blocks[-1]) > 1 or len(set(blocks[1:])) != len(blocks) - 1:
            raise self.fail(self.main, f"{package}: one control in two places is outside the subset")
        hdr_type, meta_type = self.parser_types(parser)
        instances = self.header_instances(hdr_type, self.main)
        metadata = self.struct_fields(meta_type, "meta", self.main) if meta_type else {}
        instances.update(self.meta_headers)
        if package == "V1Switch":
            if "standard_metadata_t" not in self.structs:
                what = "standard_metadata_t is not declared (#include <v1model.p4>)"
                raise self.fail(self.main, f"V1Switch: {what}")
            metadata.update(self.struct_fields("standard_metadata_t", "standard_metadata", self.main))
        pipeline = [controls[name][0] for name in blocks[1:-1]]
        deparser = controls[blocks[-1]][0]
        control = pipeline[len(pipeline) // 2 - 1] if package == "V1Switch" else pipeline[0]
        parser_node = next(n for n in self.parser_nodes if str(n.children[0]) == parser.name)
        parser.roles = self.roles(parser_node.children[1], hdr_type)
        for block in (*pipeline, deparser):
            block.roles = self.roles(controls[block.name][1], hdr_type)
        program = Program(
            self.source,
            self.text,
            self.headers,
            instances,
            metadata,
            self.constants,
            parser,
            control,
            deparser,
            self.global_actions,
        )
        program.architecture = "v1model" if package == "V1Switch" else "pna"
        program.controls = tuple(pipeline)
        self.finish(program)
        program.global_externs = global_externs
        program.emit_order = self.emits(deparser, instances, statements=package == "V1Switch")
        program.parser = parser
        return program

    def no_emit_inside(self, node: Tree) -> None:
        """P4Error at an `emit` nested in a deparser statement (headers are written after
        the deparser's other statements ran, in the order of its top-level emits)."""
        for sub in node.iter_subtrees():
            if sub.data == "call" and str(sub.children[0].children[-1]) in ("emit", "apply"):
                what = "an emit (or apply) inside a deparser's if or block"
                raise self.fail(sub, f"{what} is outside the subset")

    def global_registers(self) -> dict[str, Extern]:
        """v1model's top-level `register<T>(size) r;`: one register every control reaches."""
        out = {}
        for node in self.instances:
            args = [c for c in node.children[1:-1] if isinstance(c, Tree)]
            if str(node.children[0]) != "register" or any(a.data == "instance" for a in args):
                continue
            numbers = [Tree("number", a.children, a.meta) if a.data == "instance_number" else a for a in args]
            decl = Tree("extern_decl", [node.children[0], *numbers, node.children[-1]], node.meta)
            out[str(node.children[-1])] = self.register(decl)
        return out

    def psa_blocks(self) -> list[str]:
        """`PSA_Switch(ip, PacketReplicationEngine(), ep, BufferingQueueingEngine()) main;`:
        the six blocks, ingress parser, control and deparser, then egress's."""
        assert self.main is not None
        args = [c for c in self.main.children[1:-1] if isinstance(c, Tree) and c.data.startswith("instance")]
        if len(args) != 4:
            what = "(IngressPipeline, PacketReplicationEngine(), EgressPipeline, BufferingQueueingEngine())"
            raise self.fail(self.main, f"PSA_Switch takes {what}")
        names: list[str] = []
        for arg, want in ((args[0], "IngressPipeline"), (args[2], "EgressPipeline")):
            pipeline = self.packages.get(str(arg.children[0])) if arg.data == "instance_name" else arg
            if pipeline is None or str(pipeline.children[0]) != want:
                raise self.fail(arg, f"PSA_Switch: {arg.children[0]} is not an {want}")
            blocks = [
                c for c in pipeline.children[1:] if isinstance(c, Tree) and c.data.startswith("instance")
            ]
            odd = any(b.data != "instance" or [a for a in b.children[1:] if a] for b in blocks)
            if len(blocks) != 3 or odd:
                raise self.fail(pipeline, f"{want} takes (parser(), control(), deparser()) in this subset")
            names.extend(str(b.children[0]) for b in blocks)
        return names

    def psa_roles(self, node: Tree, kind: str, hdr: str, meta: str | None) -> dict[str, str]:
        """A PSA block's parameters by position: packet, headers, user metadata, then the
        architecture's structs (held under their type's name) and the metadata a packet
        brings in (none is bridged or resubmitted here: all zero, under the block's name)."""
        roles: dict[str, str] = {}
        for position, (pname, direction, type_) in enumerate(params_of(node.children[1])):
            tname = str(type_.children[0]) if type_.data == "named_type" else ""
            if kind == "deparser":
                role = {"packet_out": "pkt", hdr: "hdr", meta or "": "meta"}.get(tname, tname)
                if direction == "out" and role not in ("pkt", "hdr"):  # clone/resubmit/bridged
                    role = f"out.{node.children[0]}.{pname}"  # metadata: nothing holds them here
            else:
                table = PSA_ROLES[kind]
                role = table[position] if position < len(table) else "?"
                if role.startswith("psa."):
                    role = f"in.{node.children[0]}.{pname}"
                elif role == "":
                    role = tname
            if role == "?":
                raise self.fail(node, f"{node.children[0]}: parameter {pname} is not one PSA passes")
            if role in ("hdr", "meta") and tname != (hdr if role == "hdr" else meta):
                what = "the ingress and egress headers (and user metadata) must be of one type here"
                raise self.fail(type_, f"{node.children[0]}: {what}")
            if kind != "deparser" and role not in ("pkt", "hdr", "meta") and tname not in self.structs:
                raise self.fail(type_, f"{node.children[0]}: parameter {pname} must be a struct")
            roles[pname] = role
        return roles

    def build_psa(self) -> Program:
        """A PSA program: ingress parser, control and deparser, then egress's (bmv2's
        psa_switch runs them; `arch.psa` drives the blocks)."""
        assert self.main is not None
        names = self.psa_blocks()
        parsers = {p.name: p for p in self.parsers}
        controls = {c.name: (c, params) for c, params in self.controls}
        for i, name in enumerate(names):
            known = parsers if i % 3 == 0 else controls
            if name not in known:
                raise self.fail(self.main, f"no {'parser' if i % 3 == 0 else 'control'} named {name!r}")
        parser, egress_parser = parsers[names[0]], parsers[names[3]]
        nodes = {str(n.children[0]): n for n in self.parser_nodes}
        params = params_of(nodes[names[0]].children[1])
        types = [str(t.children[0]) if t.data == "named_type" else "" for _, _, t in params]
        if len(types) < 3:
            what = "PSA passes (packet, headers, metadata, ...)"
            raise self.fail(nodes[names[0]], f"parser {names[0]}: {what}")
        hdr_type, meta_type = types[1], types[2]
        metadata = self.struct_fields(meta_type, "meta", self.main) if meta_type else {}
        instances = self.header_instances(hdr_type, self.main)
        instances.update(self.meta_headers)
        blocks: list[tuple[ParserBlock | Control, Tree, str]] = [
            (parser, nodes[names[0]], "parser"),
            (egress_parser, nodes[names[3]], "parser"),
            *((controls[names[i]][0], self.control_nodes[names[i]], "control") for i in (1, 4)),
            *((controls[names[i]][0], self.control_nodes[names[i]], "deparser") for i in (2, 5)),
        ]
        for block, node, kind in blocks:
            block.roles = self.psa_roles(node, kind, hdr_type, meta_type)
            types_of = {p: t for p, _, t in params_of(node.children[1])}
            for pname, role in block.roles.items():
                ptype = types_of[pname]
                tname = str(ptype.children[0]) if ptype.data == "named_type" else ""
                held = role not in ("pkt", "hdr", "meta") and not role.startswith("out.")
                if held and tname in self.structs:
                    metadata.update(self.struct_fields(tname, role, self.main))
        ingress, egress = controls[names[1]][0], controls[names[4]][0]
        program = Program(
            self.source, self.text, self.headers, instances, metadata, self.constants,
            parser, ingress, controls[names[2]][0], self.global_actions,
        )
        program.architecture = "psa"
        program.controls = (ingress, egress)
        program.egress_parser = egress_parser
        self.finish(program)
        program.emit_order = self.emits(controls[names[2]][0], instances, statements=True)
        program.egress_emit_order = self.emits(controls[names[5]][0], instances, statements=True)
        program.egress_deparser = controls[names[5]][0]
        return program

    def finish(self, program: Program) -> None:
        """The declarations every architecture's program carries."""
        program.errors = tuple(self.errors)
        program.type_widths = {**self.typedefs, **self.enums, "error": ERROR_BITS}
        program.functions = self.functions
        program.aliases = self.aliases
        program.constant_widths = self.constant_widths
        program.structs = self.structs
        program.stacks = self.stacks
        program.blocks = {**{p.name: p for p in self.parsers}, **{c.name: c for c, _ in self.controls}}
        program.unions = self.union_groups
        program.union_stacks = self.union_stacks
        program.signed = self.signed
        program.signed_types = self.signed_types
        program.arch_instances = {str(n.children[-1]): n for n in self.instances}
        program.pna_file = self.pna_file

    def parser_types(self, parser: ParserBlock) -> tuple[str, str | None]:
        node = next(n for n in self.parser_nodes if str(n.children[0]) == parser.name)
        params = [p for p in node.children[1].children if p is not None]
        hdr = meta = None
        for param in params:
            direction, type_, _ = param.children[:3]
            tname = str(type_.children[0]) if type_.data == "named_type" else ""
            if tname in ARCH_TYPES:
                continue
            if direction is not None and str(direction) == "out":
                hdr = tname
            else:
                meta = tname
        if hdr is None:
            raise self.fail(node, f"parser {parser.name}: no `out` headers parameter")
        return hdr, meta

    def roles(self, params: Tree, hdr_type: str) -> dict[str, str]:
        """Each parameter's role: pkt, hdr, meta, istd or ostd."""
        roles = {}
        for param in (p for p in params.children if p is not None):
            _, type_, name = param.children[:3]
            tname = str(type_.children[0]) if type_.data == "named_type" else ""
            if tname in ("packet_in", "packet_out"):
                roles[str(name)] = "pkt"
            elif "input_metadata" in tname:
                roles[str(name)] = "istd"
            elif "output_metadata" in tname:
                roles[str(name)] = "ostd"
            elif tname == "standard_metadata_t":
                roles[str(name)] = "standard_metadata"
            else:
                roles[str(name)] = "hdr" if tname == hdr_type else "meta"
        return roles

    def emits(
        self, deparser: Control, instances: dict[str, HeaderType], roles: dict[str, str] | None = None,
        depth: int = 0, statements: bool = False,
    ) -> tuple[str, ...]:
        """The headers the deparser emits, in order (a sub-control it applies, `c.apply(pkt,
        hdr)`, emits its own in its place). With `statements` (v1model, PSA) other
        statements may come between the emits (they run before the headers are written, so
        an emit inside an `if` or a block is refused)."""
        order: list[str] = []
        roles = deparser.roles if roles is None else roles
        assert deparser.apply is not None
        for stmt in deparser.apply.children:
            call = stmt.children[0] if stmt.data == "call_stmt" else None
            method = str(call.children[0].children[-1]) if call is not None and call.data == "call" else ""
            is_emit, is_apply = method == "emit", method == "apply"
            if statements and not is_emit and not is_apply:
                self.no_emit_inside(stmt)
                continue
            if call is None or call.data != "call":
                raise self.fail(stmt, "the deparser may only emit headers")
            path = [str(t) for t in call.children[0].children]
            args = [a for a in call.children[1:] if a is not None]
            inner = self.control_nodes.get(deparser.instances.get(path[0], "")) if len(path) == 2 else None
            if path[-1] == "apply" and inner is not None and depth < MAX_STRUCT_NESTING:
                params = params_of(inner.children[1])
                if len(args) != len(params) or any(a.data != "ref" for a in args):
                    raise self.fail(stmt, f"{path[0]}.apply: one name per parameter of {inner.children[0]}")
                passed = {}
                for (pname, _, _), arg in zip(params, args, strict=True):
                    outer = [str(t) for t in arg.children[0].children]
                    passed[pname] = ".".join([roles.get(outer[0], outer[0]), *outer[1:]])
                sub = next(c for c, _ in self.controls if c.name == str(inner.children[0]))
                order.extend(self.emits(sub, instances, passed, depth + 1, statements))
                continue
            if path[-1] != "emit" or len(args) != 1 or args[0].data != "ref":
                raise self.fail(stmt, "the deparser may only call emit(hdr.<header>)")
            names = [str(t) for t in args[0].children[0].children]
            header = ".".join([roles.get(names[0], names[0]), *names[1:]])
            inside = [h for h in instances if h.startswith((f"{header}.", f"{header}["))]
            if header not in instances and not inside and header != "hdr":  # (hdr: maybe empty)
                raise self.fail(stmt, f"emit: {header} is not a header or a struct of headers")
            order.extend([header] if header in instances else inside)
        return tuple(order)
