/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What NCCL used in a container (src/node/nccl_used.c): the INFO lines its debug output
 * wrote into the capture directory (ORH_NCCL_RECORD_DIR, a small tmpfs the hook mounts in
 * the container where the decision turned the capture on), read through the container's
 * root and parsed per communicator: the network, the transport of each connection (NET/IB
 * with or without GPUDirect RDMA, NET/Socket, P2P, SHM), the HCAs.
 */
#ifndef ORH_NODE_NCCL_USED_H
#define ORH_NODE_NCCL_USED_H

#include <stdbool.h>
#include <stddef.h>

#include "orh/base/util.h"

/* The capture directory inside the container, and the file NCCL_DEBUG_FILE names in it
 * (NCCL expands %p to its process id; %h is not used: a host name may hold a '/') */
#define ORH_NCCL_RECORD_DIR "/run/oci-rdma-hook-nccl"
#define ORH_NCCL_RECORD_FILE ORH_NCCL_RECORD_DIR "/nccl.%p"
#define ORH_NCCL_RECORD_SUBSYS "INIT,NET"
/* the tmpfs's size: NCCL's writes past it fail, and NCCL ignores a failed write */
#define ORH_NCCL_RECORD_TMPFS_SIZE "1m"

/* What inspect reads of the directory at most */
#define ORH_NCCL_USED_MAX_FILES 64
#define ORH_NCCL_USED_MAX_FILE_BYTES (256 * 1024)
#define ORH_NCCL_USED_MAX_BYTES (1024 * 1024)

#define ORH_NCCL_USED_MAX_COMMS 32
#define ORH_NCCL_USED_MAX_HCAS 8

/* transports, as bits */
enum {
	ORH_NCCL_T_P2P = 1 << 0,        /* "via P2P/..." (CUMEM, IPC, direct pointer) */
	ORH_NCCL_T_SHM = 1 << 1,        /* "via SHM/..." */
	ORH_NCCL_T_IB = 1 << 2,         /* "via NET/IB/N" without GPUDirect RDMA */
	ORH_NCCL_T_IB_GDR = 1 << 3,     /* "via NET/IB/N/GDRDMA" */
	ORH_NCCL_T_SOCKET = 1 << 4,     /* "via NET/Socket/N" */
	ORH_NCCL_T_NET_OTHER = 1 << 5,  /* "via NET/<a plugin's name>/N" */
};

/* One communicator of one process, from its "Init START" line on. */
struct orh_nccl_comm {
	char comm_id[24];        /* "0x..." (commId), or "" where the line had none */
	long rank, nranks;       /* -1: not said */
	unsigned long pid;       /* of the line's prefix host:pid:tid */
	unsigned long tid;       /* the thread that started it */
	char network[32];        /* "Using network X"; "" not said */
	char net_other[32];      /* the name of a NET transport other than IB or Socket */
	unsigned transports;     /* ORH_NCCL_T_* */
	size_t channels;         /* connection lines ("Channel ... via") counted */
	char hcas[ORH_NCCL_USED_MAX_HCAS][32]; /* NET/IB devices its connections used */
	size_t n_hcas;
};

struct orh_nccl_used {
	struct orh_nccl_comm comms[ORH_NCCL_USED_MAX_COMMS];
	size_t n_comms;
	size_t comms_dropped;    /* past ORH_NCCL_USED_MAX_COMMS */
	size_t files;            /* files parsed */
	bool truncated;          /* a bound on files or bytes was reached */
};

/* Parse the text of one NCCL debug file (one process) into u, adding its communicators:
 * a connection line ("Channel ... via X") or "Using network X" belongs to the last
 * communicator started on the same thread, else to the last one started in the file.
 * Lines that are not NCCL INFO lines are skipped. Pure. */
void orh_nccl_used_parse(const char *text, size_t len, struct orh_nccl_used *u);

/* Read the capture directory inside the root (rootfd: the container's root directory):
 * at most ORH_NCCL_USED_MAX_FILES regular files, ORH_NCCL_USED_MAX_FILE_BYTES of each and
 * ORH_NCCL_USED_MAX_BYTES in all, opened O_NONBLOCK without following a link, the
 * directory resolved inside the root; each parsed into u. 0; -ENOENT where there is no
 * such directory; another -errno with err filled. */
int orh_nccl_used_read(int rootfd, struct orh_nccl_used *u, struct orh_err *err);

/* The transports of bits as text: "NET/IB+GDR, NET/IB, NET/Socket, P2P, SHM" (those set). */
void orh_nccl_transports_text(unsigned bits, char *out, size_t size);

#endif
