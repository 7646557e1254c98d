/* The base ("vmlinux") half of the discover fixture: the kernel types F2FS's functions take,
 * with the kernel's own layout of the fields discover reads (struct page and struct folio's
 * index at offset 32 on 64-bit). pahole -J turns its DWARF into base BTF; f2fs_node_cache.c
 * becomes split BTF on top of it, as /sys/kernel/btf/f2fs sits on /sys/kernel/btf/vmlinux. */
typedef unsigned int blk_opf_t;
typedef unsigned long pgoff_t;
typedef unsigned int dev_t;

struct list_head {
	struct list_head *next, *prev;
};

struct super_block {
	struct list_head s_list;
	dev_t s_dev;
};

struct page {
	unsigned long flags;
	union {
		struct {
			struct list_head lru;
			void *mapping;
			pgoff_t index;
			unsigned long private;
		};
		struct {
			unsigned long pp_magic;
		};
	};
};

struct folio {
	unsigned long flags;
	struct list_head lru;
	void *mapping;
	pgoff_t index;
};

/* Something of the kernel's own that is not F2FS's: never a candidate. */
int vfs_restore_compressed(struct page *page, int reason)
{
	return page->index == (pgoff_t)reason;
}

int folio_index_of(struct folio *folio)
{
	return (int)folio->index;
}

/* Keeps struct super_block in the base BTF (clang emits only used types): --accesses reads
 * its s_dev at the offset BTF gives. */
dev_t super_block_dev(struct super_block *sb)
{
	return sb->s_dev;
}
