// SPDX-License-Identifier: GPL-2.0

#include <linux/scatterlist.h>

__rust_helper struct page *rust_helper_sg_page_iter_page(struct sg_page_iter *piter)
{
	return sg_page_iter_page(piter);
}
