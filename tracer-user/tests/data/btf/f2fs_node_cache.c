/* The F2FS half of the discover fixture ("module" split BTF): functions shaped like the
 * compressed node cache RFC's (fs/f2fs/node_cache_compress.c, node_cache_policy.c; its words
 * compress, restore, reclaim, referenced, slab, queue) and mainline's node read path, with
 * F2FS's parameter types. tests/discover.rs builds it with clang -g and pahole -J and checks
 * what `nodescope probe --discover` makes of it; kallsyms.txt beside it says which of these
 * the "kernel" can probe, under which LTO/CFI names.
 *
 * On purpose: convert_abort has no function at all, restore_nomem's is inlined (in BTF, not
 * in kallsyms), restore_fail survives only as an .isra clone (its arguments rewritten), and
 * f2fs_compress_pages / f2fs_decompress_cluster are F2FS file compression, not the node
 * cache, and struct journal_slot looks like an entry but no F2FS function takes it. */
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef u32 nid_t;
typedef unsigned int blk_opf_t;
typedef unsigned long pgoff_t;

struct list_head {
	struct list_head *next, *prev;
};
struct super_block;
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

struct f2fs_sb_info {
	struct super_block *sb;
	struct list_head node_cache_queues[3];
	void *node_cache_slab[3];
	unsigned int node_ino_num;	/* 80: read by --accesses for the eviction filter */
};

/* The RFC's extended NODE_CACHE entry: payload length, private-slab slot size, CRC of the raw
 * block, and the queue it sits on. */
struct node_cache_entry {
	struct list_head list;	/* 0 */
	nid_t nid;		/* 16 */
	u16 payload_len;	/* 20 */
	u16 slot_size;		/* 22 */
	u32 crc;		/* 24 */
	u8 queue;		/* 28 */
	u8 referenced;		/* 29 */
	void *payload;		/* 32 */
};

struct compress_ctx {
	struct page **rpages;
	unsigned int clen;
};

/* mainline node.c */
int read_node_page(struct page *page, blk_opf_t op_flags)
{
	return page->index ? 0 : (int)op_flags;
}

struct page *f2fs_get_node_page(struct f2fs_sb_info *sbi, pgoff_t nid)
{
	return (struct page *)sbi->node_cache_slab[nid % 3];
}

/* node_cache_compress.c */
int f2fs_node_cache_compress_entry(struct f2fs_sb_info *sbi, struct node_cache_entry *entry,
				   unsigned int clen, unsigned int slot_size)
{
	entry->payload_len = (u16)clen;
	entry->slot_size = (u16)slot_size;
	return sbi->sb != 0;
}

void f2fs_node_cache_compress_reject(struct f2fs_sb_info *sbi, nid_t nid, unsigned int clen)
{
	sbi->node_cache_slab[0] = (void *)(unsigned long)(nid + clen);
}

int f2fs_node_cache_restore(struct f2fs_sb_info *sbi, struct node_cache_entry *entry,
			    struct page *page)
{
	page->index = entry->nid;
	return sbi->sb == 0;
}

void f2fs_node_cache_restore_fail(struct f2fs_sb_info *sbi, struct node_cache_entry *entry,
				  int reason)
{
	entry->crc = (u32)reason + (sbi->sb != 0);
}

int f2fs_node_cache_restore_nomem(struct f2fs_sb_info *sbi, struct node_cache_entry *entry)
{
	return entry->queue + (sbi->sb != 0);
}

/* node_cache_policy.c */
unsigned long f2fs_node_cache_reclaim_entry(struct f2fs_sb_info *sbi,
					    struct node_cache_entry *entry, int queue)
{
	return (unsigned long)sbi->node_cache_slab[queue] + entry->slot_size;
}

/* A shrinker batch: named for reclaim, but no entry, nid or page: never the reclaim probe. */
unsigned long f2fs_node_cache_reclaim_batch(struct f2fs_sb_info *sbi, unsigned long nr_to_scan)
{
	return nr_to_scan + (sbi->sb != 0);
}

/* Numbered from 0, as the reference module numbers it; nodescope's codes start at 1. */
enum node_cache_chance {
	NC_CHANCE_WORKER,
	NC_CHANCE_SHRINKER,
	NC_CHANCE_RACE,
	NC_CHANCE_MAX,
};

/* true when the entry was REFERENCED and got its chance: only those calls are events */
_Bool f2fs_node_cache_clear_referenced(struct f2fs_sb_info *sbi, struct node_cache_entry *entry,
				       enum node_cache_chance by)
{
	entry->referenced = 0;
	return (int)by + (sbi->sb != 0) > 1;
}

/* Not the entry type, though it has crc, slot and len members: no F2FS function takes it. */
struct journal_slot {
	u32 crc;
	u16 slot;
	u16 len;
};

int journal_slot_check(struct journal_slot *journal)
{
	return journal->crc == journal->len + journal->slot;
}

/* F2FS file compression: "compress" in the name, but no node-cache entry and no nid. */
int f2fs_compress_pages(struct compress_ctx *cc)
{
	return (int)cc->clen;
}

int f2fs_decompress_cluster(struct compress_ctx *cc, int reason)
{
	return cc->rpages == 0 ? reason : 0;
}
