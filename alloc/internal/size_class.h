/*
 * Pool size classes (the rounding is documented at nxr_pool_class_size):
 * 7 power-of-two classes from 64 B to 4 KiB, 3 page-multiple classes up to
 * 16 KiB, then four classes per power of two up to NXR_POOL_MAX_SIZE.
 */
#ifndef NXR_INTERNAL_SIZE_CLASS_H
#define NXR_INTERNAL_SIZE_CLASS_H

#include <stddef.h>

/* 7 + 3 + 4 * (40 - 14): classes 0..113. */
#define NXR__CLASS_COUNT 114u

/* The class index of a request (size <= NXR_POOL_MAX_SIZE, 0 counts as 1),
 * and its class size in *class_size. */
unsigned nxr__size_class(size_t size, size_t *class_size);

/* The size of class `cls` (< NXR__CLASS_COUNT). */
size_t nxr__class_size(unsigned cls);

/* Alignment of a class's buffers: 64 below 4 KiB, the page from 4 KiB. */
size_t nxr__class_align(size_t class_size);

#endif /* NXR_INTERNAL_SIZE_CLASS_H */
