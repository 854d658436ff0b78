// SPDX-License-Identifier: GPL-2.0

#include <linux/skbuff.h>
#include <net/dst.h>

__rust_helper void rust_helper_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

__rust_helper int rust_helper_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

/* skb_has_shared_frag() for the skb and each skb of its frag_list (skb_walk_frags). */
__rust_helper bool rust_helper_skb_walk_has_shared_frag(struct sk_buff *skb)
{
	struct sk_buff *frag;

	if (skb_has_shared_frag(skb))
		return true;
	skb_walk_frags(skb, frag)
		if (skb_has_shared_frag(frag))
			return true;
	return false;
}

__rust_helper unsigned char *rust_helper_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

__rust_helper unsigned int rust_helper_skb_headlen(const struct sk_buff *skb)
{
	return skb_headlen(skb);
}

__rust_helper void rust_helper_skb_reserve(struct sk_buff *skb, int len)
{
	skb_reserve(skb, len);
}

__rust_helper void rust_helper_skb_reset_network_header(struct sk_buff *skb)
{
	skb_reset_network_header(skb);
}

__rust_helper void rust_helper_skb_dst_set(struct sk_buff *skb, struct dst_entry *dst)
{
	skb_dst_set(skb, dst);
}

__rust_helper void rust_helper_skb_queue_head_init(struct sk_buff_head *list)
{
	skb_queue_head_init(list);
}

__rust_helper void rust_helper_skb_dst_drop(struct sk_buff *skb)
{
	skb_dst_drop(skb);
}

__rust_helper __u32 rust_helper_skb_queue_len_lockless(const struct sk_buff_head *list)
{
	return skb_queue_len_lockless(list);
}

__rust_helper void rust_helper_skb_queue_purge(struct sk_buff_head *list)
{
	skb_queue_purge(list);
}

__rust_helper void rust_helper_dst_hold(struct dst_entry *dst)
{
	dst_hold(dst);
}

__rust_helper void rust_helper_skb_set_delivery_time_mono(struct sk_buff *skb, ktime_t kt)
{
	skb_set_delivery_time(skb, kt, SKB_CLOCK_MONOTONIC);
}
