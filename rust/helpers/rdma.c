// SPDX-License-Identifier: GPL-2.0

#include <linux/scatterlist.h>

__rust_helper struct page *rust_helper_sg_page_iter_page(struct sg_page_iter *piter)
{
	return sg_page_iter_page(piter);
}

#include <linux/xarray.h>

/*
 * A pool's XArray gets a lock class of its own, passed in by the caller: its lock is taken in
 * process context only, and sharing the class of every other XArray initialised from Rust
 * (xa_init_flags() is inline, so all of this file's callers share one) would tie it, for
 * lockdep, to locks taken under spinlocks that softirqs take. The key is the caller's static,
 * not one here: helpers may be inlined into Rust, where a static of this file cannot go.
 */
__rust_helper void rust_helper_rdma_pool_init(struct xarray *xa, struct lock_class_key *key)
{
	xa_init_flags(xa, XA_FLAGS_ALLOC);
	lockdep_set_class_and_name(&xa->xa_lock, key, "rdma_pool");
}

__rust_helper int rust_helper_xa_alloc_cyclic(struct xarray *xa, u32 *id, void *entry,
					      struct xa_limit limit, u32 *next, gfp_t gfp)
{
	return xa_alloc_cyclic(xa, id, entry, limit, next, gfp);
}

__rust_helper int rust_helper_xa_insert(struct xarray *xa, unsigned long index, void *entry,
					gfp_t gfp)
{
	return xa_insert(xa, index, entry, gfp);
}

__rust_helper void *rust_helper_xa_cmpxchg(struct xarray *xa, unsigned long index, void *old,
					   void *entry, gfp_t gfp)
{
	return xa_cmpxchg(xa, index, old, entry, gfp);
}

#include <rdma/ib_verbs.h>

__rust_helper bool rust_helper_rdma_protocol_roce(const struct ib_device *device, u32 port_num)
{
	return rdma_protocol_roce(device, port_num);
}

__rust_helper bool rust_helper_ib_device_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

__rust_helper u32 rust_helper_rdma_start_port(const struct ib_device *device)
{
	return rdma_start_port(device);
}

__rust_helper u32 rust_helper_rdma_end_port(const struct ib_device *device)
{
	return rdma_end_port(device);
}

#include <linux/mm.h>

/*
 * The page of a virt-DMA address (ib_virt_dma_to_page()), or NULL if the address is not in the
 * kernel's linear map.
 */
__rust_helper struct page *rust_helper_rdma_virt_dma_page(u64 dma_addr)
{
	void *p = ib_virt_dma_to_ptr(dma_addr);

	return virt_addr_valid(p) ? virt_to_page(p) : NULL;
}
