"""The grammar of the P4-16 subset cloudtwin reads (lark, LALR), as one string.

Shift operators are two tokens (`>` `>`) so that nested type arguments such as
`Counter<bit<32>, bit<8>>` lex the way they do in C++-like front ends.
"""

from __future__ import annotations

__all__ = ["GRAMMAR"]

GRAMMAR = r"""
start: declaration*

?declaration: const_decl | typedef_decl | header_decl | struct_decl
            | parser_decl | control_decl | main_decl | action_decl
            | enum_decl | error_decl | match_kind_decl | extern_object | extern_function
            | parser_type | control_type | package_type | union_decl | function_decl
            | ";" -> empty_decl

error_decl: "error" "{" NAME ("," NAME)* [","] "}"
match_kind_decl: "match_kind" "{" NAME ("," NAME)* [","] "}"
enum_decl: "enum" [bits] NAME "{" enum_member ("," enum_member)* [","] "}"
enum_member: NAME ["=" expr]
union_decl: "header_union" NAME "{" field_decl* "}"
extern_object: "extern" NAME [type_params] "{" method_proto* "}"
method_proto: NAME "(" params ")" ";"                                   -> ctor_proto
            | ["abstract"] ret_type method_name [type_params] "(" params ")" ";"
method_name: NAME | LOOKAHEAD
extern_function: "extern" ret_type NAME [type_params] "(" params ")" ";"
?ret_type: type | "void" -> void_type
type_params: "<" NAME ("," NAME)* ">"
parser_type: "parser" NAME [type_params] "(" params ")" ";"
control_type: "control" NAME [type_params] "(" params ")" ";"
package_type: "package" NAME type_params "(" params ")" ";"

const_decl: "const" type NAME "=" expr ";"
typedef_decl: ("typedef" | "type") type NAME ";"
header_decl: "header" NAME "{" field_decl* "}"
struct_decl: "struct" NAME "{" field_decl* "}"
field_decl: type ["[" expr "]"] NAME ";"

type: bits                 -> bit_type
    | "bool"                 -> bool_type
    | NAME                   -> named_type
    | NAME "<" type ("," type)* ">" -> generic_type
    | "int" "<" NUMBER ">"   -> int_type
    | "int"                  -> infint_type
    | "varbit" "<" NUMBER ">" -> varbit_type
    | "error"                -> error_type
    | "string"               -> string_type
    | "tuple" "<" type ("," type)* ">" -> tuple_type

bits: "bit" "<" NUMBER ">" | "bit" -> bit1 | "bit" "<" "(" expr ")" ">" -> bit_expr

params: [param ("," param)*]
param: [DIRECTION] type NAME ["=" expr]
DIRECTION.2: "inout" | "in" | "out"

main_decl: NAME ["<" type ("," type)* ">"] "(" [instance ("," instance)*] ")" NAME ";"
instance: NAME "(" [instance ("," instance)*] ")"
        | NAME -> instance_name
        | NAME "." NAME ("." NAME)* -> instance_path
        | NUMBER -> instance_number

parser_decl: "parser" NAME "(" params ")" "{" parser_local* parser_state+ "}"
?parser_local: var_decl | const_decl | instance_decl | value_set_decl
value_set_decl: "value_set" "<" type ">" "(" expr ")" NAME ";"
parser_state: "state" NAME "{" statement* transition "}"
transition: "transition" NAME ";"                                  -> goto
          | "transition" "select" "(" expr_list ")" "{" select_case* "}"  -> select
select_case: keyset ":" NAME ";"
?keyset: keyset_item | "(" keyset_item ("," keyset_item)+ ")" -> keyset_tuple
keyset_item: "default"           -> ks_default
           | "_"                 -> ks_default
           | expr "&&&" expr     -> ks_mask
           | expr ".." expr      -> ks_range
           | expr                -> ks_value

control_decl: "control" NAME "(" params ")" "{" control_local* "apply" block "}"
?control_local: action_decl | table_decl | extern_decl | var_decl | const_decl | instance_decl
action_decl: "action" NAME "(" params ")" block
extern_decl: NAME "<" type ("," type)* ">" "(" [expr ("," expr)*] ")" NAME ";"
instance_decl: NAME "(" [expr ("," expr)*] ")" NAME ";"
function_decl: ret_type NAME [type_params] "(" params ")" block
table_decl: "table" NAME "{" table_prop* "}"
?table_prop: "key" "=" "{" key_elem* "}"                       -> table_key
           | "actions" "=" "{" (action_ref ";")* "}"           -> table_actions
           | [CONST] "default_action" "=" action_ref ";"        -> table_default
           | "size" "=" expr ";"                               -> table_size
           | [CONST] "entries" "=" "{" entry* "}"              -> table_entries
           | NAME "=" expr ";"                                 -> table_other
CONST.2: "const"
key_elem: expr ":" NAME ";"
action_ref: NAME ["(" [expr ("," expr)*] ")"]
entry: keyset ":" action_ref ";"

var_decl: type NAME ["=" expr] ";"

block: "{" statement* "}"
?statement: block
          | var_decl
          | const_decl
          | postfix "=" expr ";"                    -> assign
          | postfix OPASSIGN expr ";"               -> opassign
          | postfix ";"                             -> call_stmt
          | "if" "(" expr ")" statement ["else" statement]  -> if_stmt
          | "exit" ";"                              -> exit_stmt
          | "return" [expr] ";"                     -> return_stmt
          | "switch" "(" expr ")" "{" switch_case* "}" -> switch_stmt
          | "for" "(" [for_init] ";" [expr] ";" [for_update] ")" statement -> for_stmt
          | "break" ";"                             -> break_stmt
          | "continue" ";"                          -> continue_stmt
          | ";"                                     -> empty_stmt
for_init: type NAME "=" expr                 -> var_decl
        | postfix "=" expr                       -> assign
for_update: postfix "=" expr                     -> assign
          | postfix OPASSIGN expr                -> opassign
switch_case: switch_label ":" [block]
switch_label: "default" -> sw_default
            | expr      -> sw_value

path: NAME ("." NAME)*

expr_list: expr ("," expr)*
?argument: expr | NAME "=" expr -> named_arg

?expr: cond_expr
?cond_expr: or_expr | or_expr "?" expr ":" cond_expr -> mux
?or_expr: and_expr | or_expr "||" and_expr -> lor
?and_expr: bor_expr | and_expr "&&" bor_expr -> land
?bor_expr: bxor_expr | bor_expr "|" bxor_expr -> bor
?bxor_expr: band_expr | bxor_expr "^" band_expr -> bxor
?band_expr: eq_expr | band_expr "&" eq_expr -> band
?eq_expr: rel_expr | eq_expr "==" rel_expr -> eq | eq_expr "!=" rel_expr -> ne
?rel_expr: shift_expr
         | rel_expr "<" shift_expr -> lt
         | rel_expr ">" shift_expr -> gt
         | rel_expr "<=" shift_expr -> le
         | rel_expr ">=" shift_expr -> ge
?shift_expr: concat_expr
           | shift_expr "<<" concat_expr -> shl
           | shift_expr ">>" concat_expr -> shr
?concat_expr: add_expr | concat_expr "++" add_expr -> concat
?add_expr: mul_expr | add_expr "+" mul_expr -> add | add_expr "-" mul_expr -> sub
         | add_expr "|+|" mul_expr -> sat_add | add_expr "|-|" mul_expr -> sat_sub
?mul_expr: unary | mul_expr "*" unary -> mul | mul_expr "/" unary -> div | mul_expr "%" unary -> mod
?unary: postfix
      | "!" unary -> lnot
      | "~" unary -> bnot
      | "-" unary -> neg
      | "+" unary
      | "(" cast_type ")" unary -> cast
      | name_cast
      | "(" NAME ")" "{" [expr ("," expr)*] "}" -> struct_cast
      | "{" [expr ("," expr)*] "}" -> list_expr
name_cast: "(" NAME ")" postfix
         | "(" NAME ")" name_cast
?cast_type: bits -> bit_type
          | "bool" -> bool_type
          | "int" "<" NUMBER ">" -> int_type
          | "int" -> infint_type
?postfix: atom
        | postfix "." NAME                     -> member
        | postfix "[" expr "]"                 -> index
        | postfix "[" expr ":" expr "]"        -> slice_expr
        | postfix "(" [argument ("," argument)*] ")"   -> call_raw
        | postfix "." LOOKAHEAD "<" type ">" "(" ")" -> lookahead
?atom: NUMBER -> number
     | "true" -> true
     | "false" -> false
     | NAME -> name
     | "(" NAME ")" -> name
     | STRING -> string
     | "error" "." NAME -> error_const
     | "(" expr ")"

LOOKAHEAD.3: "lookahead"
OPASSIGN: "+=" | "-=" | "*=" | "&=" | "|=" | "^=" | "<<=" | ">>=" | "|+|=" | "|-|="
STRING: /"(\\.|[^"\\])*"/
NAME: /[A-Za-z_][A-Za-z_0-9]*/
NUMBER: /([0-9]+[ws])?(0[xX][0-9a-fA-F_]+|0[bB][01_]+|[0-9][0-9_]*)/

COMMENT: /\/\/[^\n]*/
BLOCK_COMMENT: /\/\*(.|\n)*?\*\//
PREPROCESSOR: /#[^\n]*/
%import common.WS
%ignore WS
%ignore COMMENT
%ignore BLOCK_COMMENT
%ignore PREPROCESSOR
"""
