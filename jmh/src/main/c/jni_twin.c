/*
 * The JNI twin of the JMH benchmarks: the same verbs as verbs4j's hot path, called the way a
 * JNI binding such as DiSNI calls them. Java serializes each request into native memory once
 * (here: baseline.c's bl_prepare_all, into a direct ByteBuffer), changes only wr_id per post
 * through the buffer, and makes one JNI call per post and one per poll, passing the objects and
 * the request as addresses (jlong). Completions are read back through the buffer.
 *
 * Natives of io.github.verbs4j.jmh.JniVerbs; built by the jmh module into
 * target/lib/libverbs4j-jni.so against $JAVA_HOME/include and <infiniband/verbs.h>. Like the
 * baseline it names libibverbs.so.1 by soname, so it drives the provider the JVM loaded first.
 */
#include <jni.h>
#include <infiniband/verbs.h>
#include <stdint.h>

#define PTR(x) ((void *)(uintptr_t)(x))

/* ibv_post_send(qp, wr, &bad): 0 or the provider's errno. */
JNIEXPORT jint JNICALL Java_io_github_verbs4j_jmh_JniVerbs_postSend(JNIEnv *env, jclass cls, jlong qp, jlong wr)
{
	(void)env;
	(void)cls;
	struct ibv_send_wr *bad;
	return ibv_post_send((struct ibv_qp *)PTR(qp), (struct ibv_send_wr *)PTR(wr), &bad);
}

/* ibv_post_recv(qp, wr, &bad): 0 or the provider's errno. */
JNIEXPORT jint JNICALL Java_io_github_verbs4j_jmh_JniVerbs_postRecv(JNIEnv *env, jclass cls, jlong qp, jlong wr)
{
	(void)env;
	(void)cls;
	struct ibv_recv_wr *bad;
	return ibv_post_recv((struct ibv_qp *)PTR(qp), (struct ibv_recv_wr *)PTR(wr), &bad);
}

/* ibv_poll_cq(cq, n, wc): completions written to wc, or a negative value. */
JNIEXPORT jint JNICALL Java_io_github_verbs4j_jmh_JniVerbs_pollCq(JNIEnv *env, jclass cls, jlong cq, jint n, jlong wc)
{
	(void)env;
	(void)cls;
	return ibv_poll_cq((struct ibv_cq *)PTR(cq), n, (struct ibv_wc *)PTR(wc));
}

/* The floor: a JNI call shaped like postSend, doing nothing. */
JNIEXPORT jint JNICALL Java_io_github_verbs4j_jmh_JniVerbs_nop(JNIEnv *env, jclass cls, jlong qp, jlong wr)
{
	(void)env;
	(void)cls;
	(void)qp;
	(void)wr;
	return 0;
}

/*
 * A direct ByteBuffer over capacity bytes of native memory at address, as a JNI binding makes
 * one over memory it did not allocate: the buffer has no memory session, so its accesses check
 * none (a buffer made through MemorySegment.asByteBuffer checks its segment's session on each).
 * The caller keeps the memory alive. Null when the JVM cannot make one.
 */
JNIEXPORT jobject JNICALL Java_io_github_verbs4j_jmh_JniVerbs_wrap(JNIEnv *env, jclass cls, jlong address, jlong capacity)
{
	(void)cls;
	return (*env)->NewDirectByteBuffer(env, PTR(address), capacity);
}
