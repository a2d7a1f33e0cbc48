using System;
using System.Net;
using System.Net.Security;
using System.Security.Cryptography.X509Certificates;

namespace CoreAI.Runtime
{
    /// <summary>
    /// Trust in a remote runtime whose certificate comes from a private CA (or is self-signed): the server's chain
    /// must end at that one certificate, and the host name must match. Without it, the platform's own roots decide.
    /// </summary>
    /// <remarks>
    /// Applied per request through HttpWebRequest.ServerCertificateValidationCallback (System.dll, both of Unity's API
    /// levels), so it never widens trust for other connections of the game. Tested here with Mono 6.8's TLS stack;
    /// Unity's own TLS backends call the same callback, but were not run here.
    /// </remarks>
    public static class TlsTrust
    {
        private const string PemBegin = "-----BEGIN CERTIFICATE-----";
        private const string PemEnd = "-----END CERTIFICATE-----";

        /// <summary>The first certificate of PEM text (`-----BEGIN CERTIFICATE-----` …).</summary>
        /// <exception cref="ArgumentException">The text holds no readable certificate.</exception>
        public static X509Certificate2 FromPem(string pem)
        {
            string text = pem ?? "";
            int begin = text.IndexOf(PemBegin, StringComparison.Ordinal);
            int end = begin < 0 ? -1 : text.IndexOf(PemEnd, begin, StringComparison.Ordinal);
            if (begin < 0 || end < 0)
                throw new ArgumentException("the trusted certificate must be PEM text (-----BEGIN CERTIFICATE----- …)");
            string body = text.Substring(begin + PemBegin.Length, end - begin - PemBegin.Length);
            try
            {
                return new X509Certificate2(Convert.FromBase64String(body.Replace("\r", "").Replace("\n", "").Trim()));
            }
            catch (Exception e) when (e is FormatException || e is System.Security.Cryptography.CryptographicException)
            {
                throw new ArgumentException("the trusted certificate is not a readable PEM certificate", e);
            }
        }

        /// <summary>A validation callback that accepts exactly the servers whose chain ends at `trusted`.</summary>
        public static RemoteCertificateValidationCallback Pinned(X509Certificate2 trusted)
        {
            if (trusted == null) throw new ArgumentNullException(nameof(trusted));
            return (sender, certificate, chain, errors) => Accepts(trusted, certificate, chain, errors);
        }

        /// <summary>
        /// Applies `trusted` (null: the platform's roots) to one request. Pinned requests get their own connection group:
        /// a kept-alive connection checked against one trust is never reused by a request under another.
        /// </summary>
        public static void Apply(HttpWebRequest request, X509Certificate2 trusted)
        {
            if (trusted == null) return;
            request.ServerCertificateValidationCallback = Pinned(trusted);
            request.ConnectionGroupName = "CoreAI.TlsTrust." + trusted.Thumbprint;
        }

        /// <summary>
        /// True when `certificate` was issued for the requested host (the TLS stack's name check passed) and a chain
        /// built with `trusted` as the only extra authority is valid and ends at `trusted`.
        /// </summary>
        public static bool Accepts(X509Certificate2 trusted, X509Certificate certificate, SslPolicyErrors errors)
        {
            return Accepts(trusted, certificate, null, errors);
        }

        /// <summary>
        /// Accepts, with the intermediate certificates the server sent (`sent`: the chain the TLS stack handed to the
        /// validation callback) available to the chain: a private CA usually signs the server through an intermediate.
        /// Only `trusted` is ever an authority; what the server sent only links the leaf to it.
        /// </summary>
        public static bool Accepts(X509Certificate2 trusted, X509Certificate certificate, X509Chain sent, SslPolicyErrors errors)
        {
            if (certificate == null) return false;
            if ((errors & (SslPolicyErrors.RemoteCertificateNotAvailable | SslPolicyErrors.RemoteCertificateNameMismatch)) != 0)
                return false;
            X509Certificate2 leaf = new X509Certificate2(certificate);
            if (SameCertificate(leaf, trusted))
                return DateTime.Now >= leaf.NotBefore && DateTime.Now <= leaf.NotAfter; // a pinned self-signed certificate
            using (X509Chain chain = new X509Chain())
            {
                chain.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck; // a private CA publishes no CRL
                chain.ChainPolicy.VerificationFlags = X509VerificationFlags.AllowUnknownCertificateAuthority;
                chain.ChainPolicy.ExtraStore.Add(trusted);
                if (sent != null)
                {
                    foreach (X509Certificate2 extra in sent.ChainPolicy.ExtraStore) chain.ChainPolicy.ExtraStore.Add(extra);
                    foreach (X509ChainElement element in sent.ChainElements) chain.ChainPolicy.ExtraStore.Add(element.Certificate);
                }
                if (!chain.Build(leaf) || chain.ChainElements.Count < 2) return false;
                return SameCertificate(chain.ChainElements[chain.ChainElements.Count - 1].Certificate, trusted);
            }
        }

        private static bool SameCertificate(X509Certificate2 a, X509Certificate2 b)
        {
            byte[] x = a.RawData;
            byte[] y = b.RawData;
            if (x.Length != y.Length) return false;
            for (int i = 0; i < x.Length; i++)
            {
                if (x[i] != y[i]) return false;
            }
            return true;
        }
    }
}
