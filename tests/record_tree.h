/* SPDX-License-Identifier: Apache-2.0 */
/* The record as the jansson tree it was built as (tests/record_tree.c): a new reference,
 * NULL where json_pack refused its first members. */
#ifndef ORH_TEST_RECORD_TREE_H
#define ORH_TEST_RECORD_TREE_H

#include <jansson.h>

#include "orh/apply/record.h"

json_t *record_tree_build(const struct orh_record_in *in);
/* Does text (len bytes) read back as one JSON value equal to tree (objects without their
 * order; reals as the same doubles)? why says how not. */
bool record_text_is_tree(const char *text, size_t len, const json_t *tree, char *why,
			 size_t size);

#endif
