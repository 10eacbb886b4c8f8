/* SPDX-License-Identifier: Apache-2.0 */
/* NCCL in the image (src/node/image_nccl.c), for the image's reader (image.c). */
#ifndef ORH_NODE_IMAGE_NCCL_H
#define ORH_NODE_IMAGE_NCCL_H

#include <stddef.h>

#include "image_read.h"

/* Every NCCL of the image into rd->img->nccl: pip's in each sys.path directory of the
 * environment env (n_env entries), then the library the loader finds; the one PyTorch
 * loads marked. */
void orh_image_nccl_read(struct image_reader *rd, const char *const *env, size_t n_env);

#endif
