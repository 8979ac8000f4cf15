/**
 * auth/access.ts, the one rule for who may see and do what: every role on a content type and on
 * `all`, ownership, admins, `requireGrants`, and the visibility rule as data agreeing with canSee.
 */
import t from 'tap';
import { Access } from '../../src/auth/access.js';
import type { Grant, Role, User } from '../../src/catalog/types.js';

const user = (name: string, admin = false): User => ({ name, admin, createdAt: 0 });
const grant = (u: string, role: Role, scope: string): Grant => ({ user: u, role, scope, createdAt: 0 });
const alicesVideo = { user: 'alice', contentType: 'video' };
const alicesAudio = { user: 'alice', contentType: 'audio' };
const own = { user: 'carl', contentType: 'audio' };

/** What carl may do with alice's video package, his own audio one, and audits, given his grants. */
function rights(grants: Grant[], options = { requireGrants: false }, admin = false) {
  const a = Access.of(user('carl', admin), grants, options);
  return {
    seeVideo: a.canSee(alicesVideo),
    seeAudio: a.canSee(alicesAudio),
    seeOwn: a.canSee(own),
    createVideo: a.canCreate('video'),
    completeVideo: a.canComplete(alicesVideo),
    completeAudio: a.canComplete(alicesAudio),
    completeOwn: a.canComplete(own),
    storageVideo: a.canSeeStorage(alicesVideo),
    storageAudio: a.canSeeStorage(alicesAudio),
    admin: a.isAdmin,
  };
}

const none = {
  seeVideo: false,
  seeAudio: false,
  seeOwn: true,
  createVideo: true,
  completeVideo: false,
  completeAudio: false,
  completeOwn: true,
  storageVideo: false,
  storageAudio: false,
  admin: false,
};

t.test('each role on a content type', async (t) => {
  t.same(rights([]), none, 'no grant: own packages only');
  t.same(rights([grant('carl', 'viewer', 'video')]), { ...none, seeVideo: true }, 'viewer: sees the type');
  t.same(
    rights([grant('carl', 'content_manager', 'video')]),
    { ...none, seeVideo: true, completeVideo: true },
    'content_manager: completes it too',
  );
  t.same(
    rights([grant('carl', 'admin', 'video')]),
    { ...none, seeVideo: true, completeVideo: true, storageVideo: true },
    'admin on a type: storage of that type, no audits',
  );
});

t.test('each role on all', async (t) => {
  t.same(
    rights([grant('carl', 'viewer', 'all')]),
    { ...none, seeVideo: true, seeAudio: true },
    'viewer on all: sees everything',
  );
  t.same(
    rights([grant('carl', 'content_manager', 'all')]),
    { ...none, seeVideo: true, seeAudio: true, completeVideo: true, completeAudio: true },
    'content_manager on all: completes everything, no storage, no audits',
  );
  const everything = {
    seeVideo: true,
    seeAudio: true,
    seeOwn: true,
    createVideo: true,
    completeVideo: true,
    completeAudio: true,
    completeOwn: true,
    storageVideo: true,
    storageAudio: true,
    admin: true,
  };
  t.same(rights([grant('carl', 'admin', 'all')]), everything, 'admin on all: an administrator');
  t.same(rights([], undefined, true), everything, 'an admin user');
});

t.test('requireGrants: creating needs content_manager or admin on the type', async (t) => {
  const strict = { requireGrants: true };
  t.equal(rights([], strict).createVideo, false);
  t.equal(rights([grant('carl', 'viewer', 'video')], strict).createVideo, false);
  t.equal(rights([grant('carl', 'content_manager', 'audio')], strict).createVideo, false, 'another type');
  t.equal(rights([grant('carl', 'content_manager', 'video')], strict).createVideo, true);
  t.equal(rights([grant('carl', 'admin', 'video')], strict).createVideo, true);
  t.equal(rights([grant('carl', 'content_manager', 'all')], strict).createVideo, true);
  t.equal(rights([], strict, true).createVideo, true, 'an admin user needs no grant');
  t.equal(rights([], strict).completeOwn, true, 'it does not take away completing one’s own request');
});

t.test('the visibility rule as data agrees with canSee', async (t) => {
  const someone = Access.of(
    user('carl'),
    [grant('carl', 'viewer', 'video'), grant('carl', 'content_manager', 'digital')],
    { requireGrants: false },
  );
  t.same(someone.visibility, {
    everything: false,
    owner: 'carl',
    contentTypes: new Set(['digital', 'video']),
  });
  t.same(Access.of(user('carl'), [grant('carl', 'viewer', 'all')], { requireGrants: false }).visibility, {
    everything: true,
  });
  t.same(Access.of(user('root', true), [], { requireGrants: false }).visibility, { everything: true });
  const v = someone.visibility;
  for (const pkg of [alicesVideo, alicesAudio, own, { user: 'alice', contentType: 'digital' }]) {
    const byData = v.everything || pkg.user === v.owner || v.contentTypes.has(pkg.contentType);
    t.equal(someone.canSee(pkg), byData, `${pkg.user}'s ${pkg.contentType}`);
  }
  t.same(rights([grant('alice', 'admin', 'all')]), none, 'another user’s grants do not count');
});

t.test('the upload link: to who may complete, while open (security-probe.md, finding 1)', async (t) => {
  const open = { ...alicesVideo, stored: false };
  const stored = { ...alicesVideo, stored: true };
  const link = (grants: Grant[], admin = false) => {
    const a = Access.of(user('carl', admin), grants, { requireGrants: false });
    return [
      a.canSeeUploadLink(open),
      a.canSeeUploadLink(stored),
      a.canSeeUploadLink({ ...own, stored: false }),
    ];
  };
  t.same(link([]), [false, false, true], 'no grant: his own open request only');
  t.same(
    link([grant('carl', 'viewer', 'video')]),
    [false, false, true],
    'a viewer sees the request, never its link',
  );
  t.same(link([grant('carl', 'viewer', 'all')]), [false, false, true], 'nor a viewer on all');
  t.same(
    link([grant('carl', 'content_manager', 'video')]),
    [true, false, true],
    'a content_manager: the open one',
  );
  t.same(link([grant('carl', 'admin', 'video')]), [true, false, true]);
  t.same(link([], true), [true, false, true], 'an admin: every open one; a stored package has none');
  t.same(
    link([grant('carl', 'content_manager', 'audio')]),
    [false, false, true],
    'a role on another type: no',
  );
});
