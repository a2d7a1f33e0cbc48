using System;
using System.IO;
using System.Runtime.InteropServices;

namespace CoreAI.Launcher
{
    /// <summary>
    /// A Stream over a file descriptor a <see cref="DescriptorFolder"/> opened: unbuffered reads or writes; Flush syncs
    /// what was written to the disk (fsync); Dispose closes the descriptor.
    /// </summary>
    internal sealed class DescriptorStream : Stream
    {
        private readonly Libc lib;
        private readonly bool reading;
        private int fd;

        public DescriptorStream(Libc lib, int fd, bool reading)
        {
            this.lib = lib;
            this.fd = fd;
            this.reading = reading;
        }

        public override bool CanRead
        {
            get { return reading && fd >= 0; }
        }

        public override bool CanWrite
        {
            get { return !reading && fd >= 0; }
        }

        public override bool CanSeek
        {
            get { return false; }
        }

        public override long Length
        {
            get { throw new NotSupportedException(); }
        }

        public override long Position
        {
            get { throw new NotSupportedException(); }
            set { throw new NotSupportedException(); }
        }

        public override int Read(byte[] buffer, int offset, int count)
        {
            Check(buffer, offset, count, reading);
            GCHandle pinned = GCHandle.Alloc(buffer, GCHandleType.Pinned);
            try
            {
                while (true)
                {
                    long read = lib.Read(fd, IntPtr.Add(pinned.AddrOfPinnedObject(), offset), count);
                    if (read >= 0) return (int)read;
                    int error = lib.LastError;
                    if (error != lib.Files.Interrupted) throw new IOException("cannot read the file (errno " + error + ")");
                }
            }
            finally
            {
                pinned.Free();
            }
        }

        public override void Write(byte[] buffer, int offset, int count)
        {
            Check(buffer, offset, count, !reading);
            GCHandle pinned = GCHandle.Alloc(buffer, GCHandleType.Pinned);
            try
            {
                while (count > 0)
                {
                    long written = lib.Write(fd, IntPtr.Add(pinned.AddrOfPinnedObject(), offset), count);
                    if (written < 0)
                    {
                        int error = lib.LastError;
                        if (error == lib.Files.Interrupted) continue;
                        throw WriteFailed(error);
                    }
                    offset += (int)written;
                    count -= (int)written;
                }
            }
            finally
            {
                pinned.Free();
            }
        }

        public override void Flush()
        {
            if (reading || fd < 0) return;
            if (lib.Fsync(fd) != 0) throw WriteFailed(lib.LastError);
        }

        public override long Seek(long offset, SeekOrigin origin)
        {
            throw new NotSupportedException();
        }

        public override void SetLength(long value)
        {
            throw new NotSupportedException();
        }

        protected override void Dispose(bool disposing)
        {
            if (fd >= 0)
            {
                lib.Close(fd);
                fd = -1;
            }
            base.Dispose(disposing);
        }

        private IOException WriteFailed(int error)
        {
            if (error == lib.Files.NoSpace || error == lib.Files.QuotaExceeded) return new DiskFullException("the disk is full");
            return new IOException("cannot write the file (errno " + error + ")");
        }

        private void Check(byte[] buffer, int offset, int count, bool allowed)
        {
            if (fd < 0) throw new ObjectDisposedException("DescriptorStream");
            if (!allowed) throw new NotSupportedException(reading ? "opened for reading" : "opened for writing");
            if (buffer == null) throw new ArgumentNullException(nameof(buffer));
            if (offset < 0 || count < 0 || offset + count > buffer.Length) throw new ArgumentOutOfRangeException(nameof(count));
        }
    }
}
