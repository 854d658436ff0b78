// SPDX-License-Identifier: GPL-2.0

#include <linux/spinlock.h>

__rust_helper void rust_helper_spin_lock_bh(spinlock_t *lock)
{
	spin_lock_bh(lock);
}

__rust_helper void rust_helper_spin_unlock_bh(spinlock_t *lock)
{
	spin_unlock_bh(lock);
}

__rust_helper int rust_helper_spin_trylock_bh(spinlock_t *lock)
{
	return spin_trylock_bh(lock);
}
