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

const_decl: "const" type NAME "=" expr ";"
typedef_decl: "typedef" type NAME ";"
header_decl: "header" NAME "{" field_decl* "}"
struct_decl: "struct" NAME "{" field_decl* "}"
field_decl: type NAME ";"

type: bits                 -> bit_type
    | "bool"                 -> bool_type
    | NAME                   -> named_type

bits: "bit" "<" NUMBER ">"

params: [param ("," param)*]
param: [DIRECTION] type NAME
DIRECTION.2: "inout" | "in" | "out"

main_decl: NAME "(" [instance ("," instance)*] ")" NAME ";"
instance: NAME "(" ")"

parser_decl: "parser" NAME "(" params ")" "{" parser_local* parser_state+ "}"
?parser_local: var_decl | const_decl
parser_state: "state" NAME "{" statement* transition "}"
transition: "transition" NAME ";"                                  -> goto
          | "transition" "select" "(" expr_list ")" "{" select_case* "}"  -> select
select_case: keyset ":" NAME ";"
?keyset: keyset_item | "(" keyset_item ("," keyset_item)+ ")" -> keyset_tuple
keyset_item: "default"           -> ks_default
           | "_"                 -> ks_default
           | expr "&&&" expr     -> ks_mask
           | expr                -> ks_value

control_decl: "control" NAME "(" params ")" "{" control_local* "apply" block "}"
?control_local: action_decl | table_decl | extern_decl | var_decl | const_decl
action_decl: "action" NAME "(" params ")" block
extern_decl: NAME "<" type ("," type)* ">" "(" [expr ("," expr)*] ")" NAME ";"
table_decl: "table" NAME "{" table_prop* "}"
?table_prop: "key" "=" "{" key_elem* "}"                       -> table_key
           | "actions" "=" "{" (action_ref ";")* "}"           -> table_actions
           | [CONST] "default_action" "=" action_ref ";"        -> table_default
           | "size" "=" expr ";"                               -> table_size
CONST.2: "const"
key_elem: expr ":" NAME ";"
action_ref: NAME ["(" [expr ("," expr)*] ")"]

var_decl: type NAME ["=" expr] ";"

block: "{" statement* "}"
?statement: block
          | var_decl
          | lvalue "=" expr ";"                     -> assign
          | call ";"                                -> call_stmt
          | "if" "(" expr ")" statement ["else" statement]  -> if_stmt
          | "exit" ";"                              -> exit_stmt
          | ";"                                     -> empty_stmt

call: path "(" [expr ("," expr)*] ")"
    | path "(" [expr ("," expr)*] ")" "." NAME -> call_member

path: NAME ("." NAME)*
lvalue: path [slice]
slice: "[" expr ":" expr "]"

expr_list: expr ("," expr)*

?expr: or_expr
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
           | shift_expr ">" ">" concat_expr -> shr
?concat_expr: add_expr | concat_expr "++" add_expr -> concat
?add_expr: mul_expr | add_expr "+" mul_expr -> add | add_expr "-" mul_expr -> sub
?mul_expr: unary | mul_expr "*" unary -> mul
?unary: postfix
      | "!" unary -> lnot
      | "~" unary -> bnot
      | "-" unary -> neg
      | "(" bits ")" unary -> cast
?postfix: atom | postfix "[" expr ":" expr "]" -> slice_expr
?atom: NUMBER -> number
     | "true" -> true
     | "false" -> false
     | call -> call_expr
     | path -> ref
     | "(" expr ")"

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
