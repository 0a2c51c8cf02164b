/* reducer_impl: the reducer's state, shared by reducer.c (buckets, rebuild,
 * broadcasts, compression) and reducer_ready.c (readiness, launch, wait: the
 * part lab 6 has learners write). Not a public header: programs use
 * ddp/reducer.h. */
#ifndef DDP_REDUCER_IMPL_H
#define DDP_REDUCER_IMPL_H

#include "ddp/reducer.h"

struct reducer_bucket {
    int *params;          /* parameter indices, in bucket order */
    int nparams;
    size_t offset, count; /* its slice of the gradient buffer, in floats */
    size_t limit;         /* the size limit it was built under, bytes */
    int pending;          /* gradients of this bucket not yet ready in this backward */
    comm_request_t *req;  /* its all-reduce, from launch until finish waited for it */
    uint16_t *half;       /* compression: the 16-bit copy that is all-reduced (device memory) */
    uint64_t seq, ready_ns, launch_ns, complete_ns, done_ns;
};

struct reducer {
    struct reducer_config cfg;
    comm_t *comm;
    model_t *model;
    int world;
    int nparams;
    struct reducer_bucket *buckets;
    int nbuckets;
    int *bucket_of;          /* parameter -> its bucket */
    unsigned char *marked;   /* parameter -> marked ready in this backward */
    int next_bucket;         /* the next bucket to launch, in bucket order */
    int in_backward;         /* between prepare_backward and finish */
    int sync;                /* 0 inside no_sync */
    int *ready_order;        /* the first reducing backward's ready order, for the rebuild */
    int nready;
    int rebuild_due;         /* ready_order is complete and the buckets were not rebuilt yet */
    struct reducer_stats stats;
    int device_rc;           /* the first error of a kernel the reducer issued in this backward, 0: none */
    device_stream_t *comm_stream; /* where the all-reduces are ordered */
    void *staging;           /* a communicator of host memory (MPI): pinned host memory the buckets and the
                              * broadcasts go through, as large as the largest of them; NULL: none needed */
    device_event_t *staged;  /* the last copy into staging done */
    device_event_t **ready, **reduced; /* per bucket (nparams of each: the most buckets there can be) */
};

/* Where the communicator finds bucket bk's all-reduce buffer (its gradient
 * slice, or compressed its 16-bit copy): that device memory itself, or its
 * slot in the pinned staging memory a host-memory communicator reads. */
void *reducer_comm_buffer(reducer_t *r, struct reducer_bucket *bk);

/* Before bucket bk's all-reduce, once what it sums (the gradient slice, or
 * the 16-bit copy) is written on the compute stream: the ready event, the
 * communication stream's wait and the all-reduce's mark on it (staged: the
 * copy into pinned host memory, on that stream), then the host's wait, since
 * the host starts the communicator next. */
int reducer_comm_begin(reducer_t *r, struct reducer_bucket *bk);

/* After bucket bk's all-reduce completed: its result marked on the
 * communication stream (staged: copied back from pinned host memory there),
 * the reduced event, the compute stream's wait. */
int reducer_comm_end(reducer_t *r, struct reducer_bucket *bk);

/* Starts bucket b's all-reduce (reducer_ready.c, lab region "launch"). */
int reducer_bucket_launch(reducer_t *r, int b);

/* Before the all-reduce, with compression: the bucket's gradients rounded to
 * 16 bits and divided by W, into bk->half (fp16_compress_hook's
 * buffer.to(float16).div_(world_size)). */
void reducer_bucket_compress(reducer_t *r, struct reducer_bucket *bk);

/* After the all-reduce: the sum divided by W, or the 16-bit result widened
 * back into the gradient slice. Call exactly once per completed all-reduce. */
void reducer_bucket_average(reducer_t *r, struct reducer_bucket *bk);

/* "fc1.bias, fc2.weight" into buf: the parameters whose gradients were not
 * marked ready in this backward. */
const char *reducer_unready_names(const reducer_t *r, char *buf, size_t len);

#endif
